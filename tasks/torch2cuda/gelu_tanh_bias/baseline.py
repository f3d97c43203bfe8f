"""PyTorch eager baseline for torch2cuda/gelu_tanh_bias: the bias add and the GELU, two kernels."""

import torch
import torch.nn.functional as F


def gelu_tanh_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias, approximate="tanh")
