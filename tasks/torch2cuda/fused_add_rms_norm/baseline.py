"""PyTorch eager baseline for torch2cuda/fused_add_rms_norm (one kernel per operation)."""

import torch


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    r = x + residual
    rf = r.float()
    y = rf * torch.rsqrt(rf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype), r
