"""Reference for torch2flydsl/silu_and_mul, computed in float32."""

import torch


def silu_and_mul_reference(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    xf = x.float()
    g, u = xf[..., :n], xf[..., n:]
    return g * torch.sigmoid(g) * u
