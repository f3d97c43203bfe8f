"""Qwen3-style per-head RMSNorm + NeoX rotary of q and k in Triton: one launch, one pass.

One program per token loads the token's cos and sin rows once, then, for all of q's heads
and all of k's heads, loads every head's two halves side by side as [BLOCK_H, D/2] tiles,
reduces each head's sum of squares across both halves, scales by rsqrt and the norm weight,
rotates, and writes bf16 once, all in float32 registers. The eager baseline's float32 copies,
pow/mean/rsqrt passes, weight multiply, rotate_half cat, broadcast cos/sin tables and
separate multiplies and adds (about twenty kernels) become 4 bytes of traffic per element.
"""

import torch
import triton
import triton.language as tl

_TILE = 2048  # elements per half-tile: 32 heads x 64, 16 heads x 128


@triton.jit
def _norm_rotate_heads(x_ptr, o_ptr, w_ptr, t, H, half, D, eps, stride_xt, stride_xh,
                       stride_ot, stride_oh, c, s, dcols, dmask, BLOCK_H: tl.constexpr):
    w1 = tl.load(w_ptr + dcols, mask=dmask, other=0.0).to(tl.float32)[None, :]
    w2 = tl.load(w_ptr + half + dcols, mask=dmask, other=0.0).to(tl.float32)[None, :]
    for h0 in range(0, H, BLOCK_H):
        heads = h0 + tl.arange(0, BLOCK_H)
        mask = (heads < H)[:, None] & dmask[None, :]
        x1_ptr = x_ptr + t * stride_xt + heads[:, None] * stride_xh + dcols[None, :]
        x1 = tl.load(x1_ptr, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x1_ptr + half, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x1 * x1 + x2 * x2, axis=1) / D + eps)[:, None]
        y1 = x1 * rstd * w1
        y2 = x2 * rstd * w2
        o1_ptr = o_ptr + t * stride_ot + heads[:, None] * stride_oh + dcols[None, :]
        tl.store(o1_ptr, (y1 * c - y2 * s).to(o_ptr.dtype.element_ty), mask=mask)
        tl.store(o1_ptr + half, (y2 * c + y1 * s).to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _qk_norm_rope_kernel(q_ptr, k_ptr, qw_ptr, kw_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr,
                         Hq, Hk, half, D, eps,
                         stride_qt, stride_qh, stride_kt, stride_kh,
                         stride_qot, stride_qoh, stride_kot, stride_koh, stride_cos, stride_sin,
                         BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    dcols = tl.arange(0, BLOCK_D)
    dmask = dcols < half
    c = tl.load(cos_ptr + t * stride_cos + dcols, mask=dmask, other=0.0)[None, :]
    s = tl.load(sin_ptr + t * stride_sin + dcols, mask=dmask, other=0.0)[None, :]
    _norm_rotate_heads(q_ptr, qo_ptr, qw_ptr, t, Hq, half, D, eps, stride_qt, stride_qh,
                       stride_qot, stride_qoh, c, s, dcols, dmask, BLOCK_HQ)
    _norm_rotate_heads(k_ptr, ko_ptr, kw_ptr, t, Hk, half, D, eps, stride_kt, stride_kh,
                       stride_kot, stride_koh, c, s, dcols, dmask, BLOCK_HK)


def qk_norm_rope(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor,
                 k_weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float):
    """Normalise every head of q [T, Hq, D] and k [T, Hk, D] (bf16), then rotate; return (q', k').

    y = x / sqrt(mean(x**2 over D) + eps) * weight (q_weight / k_weight: [D] bf16); with
    y1 = y[..., :D/2], y2 = y[..., D/2:] and the token's cos, sin rows ([T, D/2] float32):
    out = cat(y1 * c - y2 * s, y2 * c + y1 * s), computed in float32, bf16 out.
    """
    assert q.ndim == 3 and k.ndim == 3 and q.stride(2) == 1 and k.stride(2) == 1
    assert cos.stride(1) == 1 and sin.stride(1) == 1
    q_weight, k_weight = q_weight.contiguous(), k_weight.contiguous()
    T, Hq, D = q.shape
    Hk = k.shape[1]
    half = D // 2
    q_out = torch.empty((T, Hq, D), device=q.device, dtype=q.dtype)
    k_out = torch.empty((T, Hk, D), device=k.device, dtype=k.dtype)
    if T == 0 or half == 0:
        return q_out, k_out
    BLOCK_D = triton.next_power_of_2(half)
    max_h = max(1, _TILE // BLOCK_D)
    BLOCK_HQ = min(triton.next_power_of_2(max(Hq, 1)), max_h)
    BLOCK_HK = min(triton.next_power_of_2(max(Hk, 1)), max_h)
    num_warps = 4 if BLOCK_HQ * BLOCK_D >= 1024 else 2
    _qk_norm_rope_kernel[(T,)](
        q, k, q_weight, k_weight, cos, sin, q_out, k_out, Hq, Hk, half, D, eps,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        cos.stride(0), sin.stride(0),
        BLOCK_HQ=BLOCK_HQ, BLOCK_HK=BLOCK_HK, BLOCK_D=BLOCK_D, num_warps=num_warps,
    )
    return q_out, k_out
