"""Residual add + RMSNorm (vLLM's fused_add_rms_norm) in Triton: to be written."""

import torch


def add_rms_norm_residual(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (out, new_residual), both bfloat16 [T, H]:

    new_residual = x + residual
    out = new_residual / sqrt(mean(new_residual**2, dim=-1) + eps) * weight

    x, residual: [T, H] bfloat16, contiguous; weight: [H] bfloat16.
    """
    raise NotImplementedError("implement add_rms_norm_residual with a Triton kernel")
