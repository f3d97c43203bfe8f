"""PyTorch eager baseline for torch2hip/fused_add_layer_norm: an add, then layer_norm."""

import torch
import torch.nn.functional as F


def fused_add_layer_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                         bias: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    r = x + residual
    y = F.layer_norm(r, (r.shape[-1],), weight, bias, eps)
    return y, r
