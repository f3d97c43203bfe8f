"""Reference for torch2cuda/gelu_tanh_bias, computed in float32."""

import math

import torch


def gelu_tanh_bias_reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    v = x.float() + bias.float()
    return 0.5 * v * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v.pow(3))))
