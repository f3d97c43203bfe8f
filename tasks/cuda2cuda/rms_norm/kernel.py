"""RMSNorm over the rows of a bf16 [M, N] tensor: allocates the output and launches kernel.cu."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["rms_norm_bf16"])


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise TypeError(f"rms_norm handles bfloat16, got {x.dtype} and {weight.dtype}")
    x, weight = x.contiguous(), weight.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    _lib.rms_norm_bf16(x, weight, out, M, N, float(eps))
    return out
