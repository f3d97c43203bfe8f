"""Embedding lookup out[i, :] = table[idx[i], :] (bf16): allocates the output and launches kernel.cu."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["embedding_gather_bf16"])


def embedding_gather(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    if table.dtype != torch.bfloat16 or table.dim() != 2:
        raise TypeError(
            f"embedding_gather handles a bfloat16 [V, D] table, got {table.dtype} {tuple(table.shape)}"
        )
    if idx.dtype != torch.int64 or idx.dim() != 1:
        raise TypeError(f"embedding_gather takes int64 [N] ids, got {idx.dtype} {tuple(idx.shape)}")
    table, idx = table.contiguous(), idx.contiguous()
    N, D = idx.shape[0], table.shape[1]
    out = torch.empty((N, D), dtype=table.dtype, device=table.device)
    _lib.embedding_gather_bf16(table, idx, out, N, D)
    return out
