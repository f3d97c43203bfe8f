"""PyTorch eager baseline for torch2triton/qk_norm_rope (Hugging Face Qwen3 style, in float32)."""

import torch


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    variance = xf.pow(2).mean(-1, keepdim=True)
    return weight.float() * (xf * torch.rsqrt(variance + eps))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def qk_norm_rope(q, k, q_weight, k_weight, cos, sin, eps):
    cos_full = torch.cat((cos, cos), dim=-1).unsqueeze(1)  # [T, 1, D]
    sin_full = torch.cat((sin, sin), dim=-1).unsqueeze(1)
    qn = _rms_norm(q, q_weight, eps)
    kn = _rms_norm(k, k_weight, eps)
    q_out = qn * cos_full + _rotate_half(qn) * sin_full
    k_out = kn * cos_full + _rotate_half(kn) * sin_full
    return q_out.to(q.dtype), k_out.to(k.dtype)
