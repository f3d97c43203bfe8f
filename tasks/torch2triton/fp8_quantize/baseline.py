"""Eager PyTorch baseline for torch2triton/fp8_quantize (one kernel per op)."""

import torch


def fp8_quantize_eager(x: torch.Tensor):
    xf = x.float()
    amax = xf.abs().amax(dim=-1, keepdim=True)
    scale = torch.clamp(amax / 448.0, min=1e-12)
    q = torch.clamp(xf / scale, -448.0, 448.0).to(torch.float8_e4m3fn)
    return q, scale
