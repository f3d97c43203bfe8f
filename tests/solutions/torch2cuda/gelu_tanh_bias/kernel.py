"""gelu_tanh_bias in CUDA: one fused kernel (kernel.cu) instead of PyTorch's add and GELU."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["gelu_tanh_bias_bf16"])


def gelu_tanh_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.bfloat16 or bias.dtype != torch.bfloat16 or x.dim() != 2:
        raise TypeError(f"gelu_tanh_bias handles bfloat16 [M, N] and [N], got {x.dtype} "
                        f"{tuple(x.shape)} and {bias.dtype}")
    x, bias = x.contiguous(), bias.contiguous()
    M, N = x.shape
    out = torch.empty_like(x)
    _lib.gelu_tanh_bias_bf16(x, bias, out, M, N)
    return out
