"""PyTorch eager baseline for torch2triton/geglu (vLLM's GeluAndMul.forward_native, tanh):
a GELU kernel over the gate half, then a multiply kernel with the up half."""

import torch
import torch.nn.functional as F


def geglu(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return F.gelu(x[..., :h], approximate="tanh") * x[..., h:]
