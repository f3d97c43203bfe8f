"""Qwen3-style per-head RMSNorm of q and k followed by NeoX rotary, in Triton: to be written."""

import torch


def qk_norm_rope(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor,
                 k_weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float):
    """Normalise every head of q [T, Hq, D] and k [T, Hk, D] (bf16), then rotate; return (q', k').

    y = x / sqrt(mean(x**2 over D) + eps) * weight (q_weight / k_weight: [D] bf16); with
    y1 = y[..., :D/2], y2 = y[..., D/2:] and the token's cos, sin rows ([T, D/2] float32):
    out = cat(y1 * c - y2 * s, y2 * c + y1 * s), computed in float32, bf16 out.
    """
    raise NotImplementedError("implement qk_norm_rope with a Triton kernel")
