"""Reference for torch2triton/fp8_quantize.

Returns, in float32, the exact (unrounded) scaled values y = clamp(x / scale, -448, 448)
that q must round to e4m3, and the per-row scale = max(amax(|x|) / 448, 1e-12)."""

import torch

FP8_MAX = 448.0
MIN_SCALE = 1e-12


def fp8_quantize_reference(x: torch.Tensor):
    xf = x.to(torch.float32)
    amax = xf.abs().amax(dim=-1, keepdim=True)
    scale = torch.clamp(amax / FP8_MAX, min=MIN_SCALE)
    y = torch.clamp(xf / scale, -FP8_MAX, FP8_MAX)
    return y, scale
