"""Rotary position embedding, NeoX style (baseline: eager PyTorch, in float32).

rotary(q[T,Hq,D], k[T,Hk,D], positions[T] int64, cos_sin[Lmax,D] fp32) -> (q_out, k_out)
cos_sin[:, :D/2] holds cos, cos_sin[:, D/2:] sin, per position.
"""

import torch


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


def rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
           cos_sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    half = q.shape[-1] // 2
    table = cos_sin.index_select(0, positions)
    cos = table[:, :half].unsqueeze(1)
    sin = table[:, half:].unsqueeze(1)
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
