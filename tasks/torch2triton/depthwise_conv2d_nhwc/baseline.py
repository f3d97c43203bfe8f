"""PyTorch eager baseline for torch2triton/depthwise_conv2d_nhwc: the NHWC tensor viewed as a
channels_last NCHW tensor, F.conv2d with groups=C (cuDNN on a GPU), viewed back as NHWC."""

import torch
import torch.nn.functional as F


def depthwise_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    C = x.shape[-1]
    y = F.conv2d(x.permute(0, 3, 1, 2), weight.unsqueeze(1), bias, padding=1, groups=C)
    return y.permute(0, 2, 3, 1).contiguous()
