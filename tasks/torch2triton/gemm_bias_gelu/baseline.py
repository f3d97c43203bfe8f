"""Eager PyTorch baseline for torch2triton/gemm_bias_gelu: three separate ops."""

import torch


def gemm_bias_gelu_eager(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    y = torch.matmul(a, b)
    y = y + bias
    return torch.nn.functional.gelu(y)
