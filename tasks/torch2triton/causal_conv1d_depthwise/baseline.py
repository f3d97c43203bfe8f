"""PyTorch eager baseline for torch2triton/causal_conv1d_depthwise."""

import torch
import torch.nn.functional as F


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    D, W = weight.shape
    L = x.shape[-1]
    y = F.conv1d(x, weight.unsqueeze(1), bias, padding=W - 1, groups=D)[..., :L]
    return F.silu(y)
