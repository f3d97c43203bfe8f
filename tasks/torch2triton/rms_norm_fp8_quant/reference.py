"""Reference for torch2triton/rms_norm_fp8_quant, in float64.

Returns the exact (unrounded) scaled values clamp(y / scale, -448, 448) that q must round to
e4m3, with y = x / sqrt(mean(x**2) + eps) * weight, and the per-row
scale = max(amax(|y|) / 448, 1e-12)."""

import torch

FP8_MAX = 448.0
MIN_SCALE = 1e-12


def rms_norm_fp8_quant_reference(x: torch.Tensor, weight: torch.Tensor, eps: float):
    xf = x.to(torch.float64)
    y = xf * torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps) * weight.to(torch.float64)
    scale = torch.clamp(y.abs().amax(dim=-1, keepdim=True) / FP8_MAX, min=MIN_SCALE)
    return torch.clamp(y / scale, -FP8_MAX, FP8_MAX), scale
