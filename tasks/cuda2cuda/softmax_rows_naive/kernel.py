"""Row softmax of a bf16 [M, N] tensor: allocates the output and launches kernel.cu."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["softmax_rows_bf16"])


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.bfloat16 or x.dim() != 2:
        raise TypeError(f"softmax_rows handles bfloat16 [M, N], got {x.dtype} {tuple(x.shape)}")
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    _lib.softmax_rows_bf16(x, out, M, N)
    return out
