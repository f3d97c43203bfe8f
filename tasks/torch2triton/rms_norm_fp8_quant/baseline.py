"""Eager PyTorch baseline for torch2triton/rms_norm_fp8_quant (one kernel per op, float32)."""

import torch


def rms_norm_fp8_quant(x: torch.Tensor, weight: torch.Tensor, eps: float):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    scale = torch.clamp(y.abs().amax(dim=-1, keepdim=True) / 448.0, min=1e-12)
    q = torch.clamp(y / scale, -448.0, 448.0).to(torch.float8_e4m3fn)
    return q, scale
