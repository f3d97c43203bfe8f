"""PyTorch eager baseline for torch2triton/rope_neox_qk (Hugging Face style rotate_half)."""

import torch


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_neox_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    cos_full = torch.cat((cos, cos), dim=-1).unsqueeze(1)  # [T, 1, Dh]
    sin_full = torch.cat((sin, sin), dim=-1).unsqueeze(1)
    qf, kf = q.float(), k.float()
    q_out = qf * cos_full + _rotate_half(qf) * sin_full
    k_out = kf * cos_full + _rotate_half(kf) * sin_full
    return q_out.to(q.dtype), k_out.to(k.dtype)
