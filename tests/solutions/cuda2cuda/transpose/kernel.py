"""Transpose of a bf16 [M, N] matrix into a new contiguous [N, M] one: launches kernel.cu."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["transpose_bf16"])


def transpose(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.bfloat16 or x.dim() != 2:
        raise TypeError(f"transpose handles 2D bfloat16 tensors, got {x.dim()}D {x.dtype}")
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    _lib.transpose_bf16(x, out, M, N)
    return out
