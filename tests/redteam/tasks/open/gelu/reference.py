"""Reference for triton2triton/gelu: tanh-approximated GELU, computed in float32."""

import math

import torch


def gelu_reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    inner = math.sqrt(2.0 / math.pi) * (xf + 0.044715 * xf * xf * xf)
    return 0.5 * xf * (1.0 + torch.tanh(inner))
