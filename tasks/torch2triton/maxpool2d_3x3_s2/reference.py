"""Reference for torch2triton/maxpool2d_3x3_s2: 3x3 / stride 2 / padding 1 max pooling in
float32 (exact: the result is one of the bf16 inputs)."""

import torch
import torch.nn.functional as F


def maxpool2d_reference(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x.float(), kernel_size=3, stride=2, padding=1)
