"""Reference for torch2triton/layer_norm_residual_gelu: residual add, LayerNorm and tanh GELU,
all in float32 (the sum is not rounded to bf16)."""

import math

import torch
import torch.nn.functional as F


def layer_norm_residual_gelu_reference(x: torch.Tensor, residual: torch.Tensor,
                                       weight: torch.Tensor, bias: torch.Tensor,
                                       eps: float) -> torch.Tensor:
    s = x.float() + residual.float()
    z = F.layer_norm(s, (s.shape[-1],), weight.float(), bias.float(), eps)
    inner = math.sqrt(2.0 / math.pi) * (z + 0.044715 * z * z * z)
    return 0.5 * z * (1.0 + torch.tanh(inner))
