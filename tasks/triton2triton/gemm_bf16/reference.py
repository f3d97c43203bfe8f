"""Reference for triton2triton/gemm_bf16: C = A @ B in float64."""

import torch


def gemm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # float64 keeps the reference free of TF32 settings and of accumulation-order error.
    return a.to(torch.float64) @ b.to(torch.float64)
