"""Residual add + LayerNorm + tanh GELU in Triton: to be written."""

import torch


def layer_norm_residual_gelu(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                             bias: torch.Tensor, eps: float) -> torch.Tensor:
    """Return gelu_tanh(layer_norm(x + residual, weight, bias, eps)) as a new bfloat16 [T, H].

    x, residual: [T, H] bfloat16, contiguous; weight, bias: [H] bfloat16; eps: float (1e-5).
    """
    raise NotImplementedError("implement layer_norm_residual_gelu with a Triton kernel")
