"""PyTorch eager baseline for torch2triton/add_rms_norm_residual (vLLM's RMSNorm forward_native
with a residual: one kernel per operation, float32 intermediates)."""

import torch


def add_rms_norm_residual(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    h = x.float() + residual.float()
    new_residual = h.to(x.dtype)
    variance = h.pow(2).mean(dim=-1, keepdim=True)
    out = (h * torch.rsqrt(variance + eps)).to(x.dtype) * weight
    return out, new_residual
