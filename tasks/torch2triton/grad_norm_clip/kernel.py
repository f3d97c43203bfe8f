"""Gradient clipping by global L2 norm in Triton: to be written."""

import torch


def grad_norm_clip(g: torch.Tensor, max_norm: float):
    """Return (g * min(1, max_norm / (||g||_2 + 1e-6)), ||g||_2): a new float32 [N] tensor and a
    0-dim float32 tensor, computed without synchronising with the host.

    g: contiguous float32 [N]; max_norm: float > 0.
    """
    raise NotImplementedError("implement grad_norm_clip with Triton kernels")
