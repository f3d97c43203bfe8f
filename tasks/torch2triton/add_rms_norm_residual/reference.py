"""Reference for torch2triton/add_rms_norm_residual, computed in float32."""

import torch


def add_rms_norm_residual_reference(x: torch.Tensor, residual: torch.Tensor,
                                    weight: torch.Tensor, eps: float
                                    ) -> tuple[torch.Tensor, torch.Tensor]:
    h = x.float() + residual.float()
    out = h * torch.rsqrt(h.square().mean(dim=-1, keepdim=True) + eps) * weight.float()
    return out, h
