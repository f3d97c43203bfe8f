"""Reference for torch2triton/linear_bias_residual: x @ W^T + bias + residual in float64."""

import torch


def linear_bias_residual_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                                   residual: torch.Tensor) -> torch.Tensor:
    y = x.to(torch.float64) @ weight.to(torch.float64).T
    return y + bias.to(torch.float64) + residual.to(torch.float64)
