"""The MLP's activation (baseline: eager PyTorch).

silu_and_mul(x[T,2I]) -> [T,I] = silu(x[:, :I]) * x[:, I:]
"""

import torch
import torch.nn.functional as F


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]
