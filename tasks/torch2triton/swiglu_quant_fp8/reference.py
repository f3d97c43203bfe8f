"""Reference for torch2triton/swiglu_quant_fp8, in float64.

Returns the exact (unrounded) scaled values y / scale = clamp(silu(a) * b / scale, -448, 448)
that q must round to e4m3, and the per-row scale = max(amax(|silu(a) * b|) / 448, 1e-12)."""

import torch

FP8_MAX = 448.0
MIN_SCALE = 1e-12


def swiglu_quant_fp8_reference(x: torch.Tensor):
    H = x.shape[-1] // 2
    xf = x.to(torch.float64)
    a, b = xf[:, :H], xf[:, H:]
    y = a * torch.sigmoid(a) * b
    scale = torch.clamp(y.abs().amax(dim=-1) / FP8_MAX, min=MIN_SCALE)
    return torch.clamp(y / scale[:, None], -FP8_MAX, FP8_MAX), scale
