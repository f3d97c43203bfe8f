"""Reference for torch2triton/causal_conv1d_depthwise: float32 causal depthwise conv + SiLU."""

import torch
import torch.nn.functional as F


def causal_conv1d_reference(x: torch.Tensor, weight: torch.Tensor,
                            bias: torch.Tensor) -> torch.Tensor:
    D, W = weight.shape
    L = x.shape[-1]
    y = F.conv1d(x.float(), weight.float().unsqueeze(1), bias.float(), padding=W - 1,
                 groups=D)[..., :L]
    return F.silu(y)
