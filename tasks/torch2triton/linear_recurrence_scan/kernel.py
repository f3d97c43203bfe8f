"""Gated linear recurrence (first-order scan over time) in Triton: to be written."""

import torch


def linear_recurrence_scan(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Return h with h[b, t, :] = a[b, t, :] * h[b, t - 1, :] + x[b, t, :] and h[b, -1, :] = 0.

    a, x: [B, T, D] bfloat16 (float16 in the CPU smoke case), contiguous; the recurrence
    runs in float32 and h is returned as a new tensor [B, T, D] of x's dtype.
    """
    raise NotImplementedError("implement linear_recurrence_scan with a Triton kernel")
