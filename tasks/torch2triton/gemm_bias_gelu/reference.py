"""Reference for torch2triton/gemm_bias_gelu: exact (erf) GELU of A @ B + bias, in float64."""

import torch


def gemm_bias_gelu_reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = a.to(torch.float64) @ b.to(torch.float64) + bias.to(torch.float64)
    return torch.nn.functional.gelu(x)
