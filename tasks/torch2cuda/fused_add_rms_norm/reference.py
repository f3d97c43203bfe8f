"""Reference for torch2cuda/fused_add_rms_norm, computed in float32."""

import torch


def fused_add_rms_norm_reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    r = x.float() + residual.float()
    y = r * torch.rsqrt(r.square().mean(dim=-1, keepdim=True) + eps) * weight.float()
    return y, r
