"""Reference for torch2triton/depthwise_conv2d_nhwc: float32 3x3 depthwise conv + bias."""

import torch
import torch.nn.functional as F


def depthwise_conv2d_reference(x: torch.Tensor, weight: torch.Tensor,
                               bias: torch.Tensor) -> torch.Tensor:
    C = x.shape[-1]
    y = F.conv2d(x.float().permute(0, 3, 1, 2), weight.float().unsqueeze(1), bias.float(),
                 padding=1, groups=C)
    return y.permute(0, 2, 3, 1).contiguous()
