"""Reference for torch2triton/grad_norm_clip: global L2-norm gradient clipping, in float64."""

import torch


def grad_norm_clip_reference(g: torch.Tensor, max_norm: float):
    gd = g.double()
    norm = torch.sqrt((gd * gd).sum())
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    return gd * coef, norm
