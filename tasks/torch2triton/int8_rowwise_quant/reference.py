"""Reference for torch2triton/int8_rowwise_quant.

Returns the exact (unrounded) scaled values y = clamp(x / scale, -127, 127), in float64, that
q must round to the nearest integer, and the per-row float32 scale = amax(|x|) / 127 (1.0 for
an all-zero row). y divides by that float32 scale (not by the exact amax / 127), as a
candidate's kernel does."""

import torch

INT8_MAX = 127.0


def int8_rowwise_quant_reference(x: torch.Tensor):
    xf = x.to(torch.float32)
    amax = xf.abs().amax(dim=-1)
    scale = torch.where(amax > 0, amax / INT8_MAX, torch.ones_like(amax))
    y = torch.clamp(x.double() / scale.double()[:, None], -INT8_MAX, INT8_MAX)
    return y, scale
