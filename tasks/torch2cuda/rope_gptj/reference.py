"""Reference for torch2cuda/rope_gptj: interleaved (GPT-J) rotary embedding in float64."""

import torch


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    T, H, D = x.shape
    xf = x.double().view(T, H, D // 2, 2)
    x0, x1 = xf[..., 0], xf[..., 1]
    c, s = cos.double()[:, None, :], sin.double()[:, None, :]
    return torch.stack((x0 * c - x1 * s, x1 * c + x0 * s), dim=-1).view(T, H, D)


def rope_gptj_reference(q, k, cos, sin):
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
