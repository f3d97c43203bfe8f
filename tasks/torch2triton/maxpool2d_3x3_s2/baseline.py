"""PyTorch eager baseline for torch2triton/maxpool2d_3x3_s2 (the ResNet stem's pooling)."""

import torch
import torch.nn.functional as F


def maxpool2d(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, kernel_size=3, stride=2, padding=1)
