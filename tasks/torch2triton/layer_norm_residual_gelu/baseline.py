"""PyTorch eager baseline for torch2triton/layer_norm_residual_gelu: an add, F.layer_norm and
F.gelu, three kernels with bf16 intermediates."""

import torch
import torch.nn.functional as F


def layer_norm_residual_gelu(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                             bias: torch.Tensor, eps: float) -> torch.Tensor:
    h = x + residual
    z = F.layer_norm(h, (h.shape[-1],), weight, bias, eps)
    return F.gelu(z, approximate="tanh")
