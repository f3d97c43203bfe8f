"""Reference for torch2triton/qk_norm_rope: per-head RMSNorm, then NeoX rotary, in float32."""

import torch


def _norm_rope(x, w, cos, sin, eps):
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps) * w.to(torch.float32)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def qk_norm_rope_reference(q, k, q_weight, k_weight, cos, sin, eps):
    c = cos.to(torch.float32)[:, None, :]  # [T, 1, D/2]
    s = sin.to(torch.float32)[:, None, :]
    return _norm_rope(q, q_weight, c, s, eps), _norm_rope(k, k_weight, c, s, eps)
