"""Row sums of a float32 [M, N] matrix: allocates the output and launches kernel.cu."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["row_sum_fp32"])


def row_sum(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.float32 or x.dim() != 2:
        raise TypeError(f"row_sum handles float32 [M, N], got {x.dtype} {tuple(x.shape)}")
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty((M,), dtype=torch.float32, device=x.device)
    _lib.row_sum_fp32(x, out, M, N)
    return out
