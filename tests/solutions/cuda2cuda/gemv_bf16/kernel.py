"""Matrix-vector product y = A x in bf16: allocates the output and launches kernel.cu."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["gemv_bf16"])


def gemv(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    if a.dtype != torch.bfloat16 or x.dtype != torch.bfloat16 or a.dim() != 2 or x.dim() != 1:
        raise TypeError(f"gemv handles bfloat16 [M, K] and [K], got {a.dtype} {tuple(a.shape)} "
                        f"and {x.dtype} {tuple(x.shape)}")
    a, x = a.contiguous(), x.contiguous()
    M, K = a.shape
    y = torch.empty((M,), dtype=a.dtype, device=a.device)
    _lib.gemv_bf16(a, x, y, M, K)
    return y
