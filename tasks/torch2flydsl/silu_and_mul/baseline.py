"""PyTorch eager baseline for torch2flydsl/silu_and_mul: float32 math, rounded once."""

import torch
import torch.nn.functional as F


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    g, u = x[..., :n].float(), x[..., n:].float()
    return (F.silu(g) * u).to(x.dtype)
