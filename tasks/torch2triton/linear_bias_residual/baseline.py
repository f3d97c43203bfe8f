"""PyTorch eager baseline for torch2triton/linear_bias_residual: cuBLAS linear, then an add."""

import torch
import torch.nn.functional as F


def linear_bias_residual(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                         residual: torch.Tensor) -> torch.Tensor:
    return F.linear(x, weight, bias) + residual
