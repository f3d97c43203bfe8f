"""PyTorch eager baseline for torch2triton/moe_grouped_gemm: a Python loop of per-expert matmuls."""

import torch


def moe_grouped_gemm(x: torch.Tensor, expert_offsets: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty((x.shape[0], w.shape[1]), device=x.device, dtype=x.dtype)
    offsets = expert_offsets.tolist()  # host sync
    for e in range(w.shape[0]):
        start, end = offsets[e], offsets[e + 1]
        if end > start:
            out[start:end] = torch.matmul(x[start:end], w[e].T)
    return out
