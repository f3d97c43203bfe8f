"""layer_norm in CUDA: one block per row, the row read once (kernel.cu)."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["layer_norm_bf16"])


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               eps: float) -> torch.Tensor:
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16:
        raise TypeError(f"layer_norm handles bfloat16, got {x.dtype}, {weight.dtype}, {bias.dtype}")
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    _lib.layer_norm_bf16(x, weight, bias, out, M, N, float(eps))
    return out
