"""Reference for cuda2cuda/gemv_bf16: y = A x in float64."""

import torch


def gemv_reference(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return a.double() @ x.double()
