"""PyTorch eager baseline for torch2hip/silu_and_mul."""

import torch
import torch.nn.functional as F


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    return F.silu(x[..., :n]) * x[..., n:]
