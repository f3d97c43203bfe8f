"""Causal depthwise conv1d + SiLU (Mamba) in Triton: to be written."""

import torch


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Return silu(bias[d] + sum_j weight[d, j] * x[b, d, t - (W - 1) + j]), zero left padding.

    x: [B, D, L] bfloat16, contiguous; weight: [D, W] bfloat16; bias: [D] bfloat16.
    Returns a new contiguous [B, D, L] bfloat16 tensor.
    """
    raise NotImplementedError("implement causal_conv1d with a Triton kernel")
