"""Reference for torch2triton/geglu: tanh-approximated GELU of the gate times the up half,
computed in float32."""

import math

import torch


def geglu_reference(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    xf = x.float()
    a, b = xf[..., :h], xf[..., h:]
    inner = math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)
    return 0.5 * a * (1.0 + torch.tanh(inner)) * b
