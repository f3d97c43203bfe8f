"""GPT-NeoX rotary embedding of q and k in Triton: one launch, one pass over each tensor.

One program per token loads the token's cos and sin rows once, then rotates all of q's heads
and all of k's heads as [BLOCK_H, Dh/2] tiles (the two halves of every head loaded side by
side), in float32 registers, writing bf16 once. The eager baseline's float32 copies, the
rotate_half cat, the broadcast cos/sin tables and the separate multiplies and adds (about a
dozen kernels and ~50 bytes of traffic per element) become 4 bytes per element.
"""

import torch
import triton
import triton.language as tl

_TILE = 2048  # elements per half-tile: 32 heads x 64, 16 heads x 128


@triton.jit
def _rotate_heads(x_ptr, o_ptr, t, H, half, stride_xt, stride_xh, stride_ot, stride_oh,
                  c, s, dcols, dmask, BLOCK_H: tl.constexpr):
    for h0 in range(0, H, BLOCK_H):
        heads = h0 + tl.arange(0, BLOCK_H)
        mask = (heads < H)[:, None] & dmask[None, :]
        x1_ptr = x_ptr + t * stride_xt + heads[:, None] * stride_xh + dcols[None, :]
        x1 = tl.load(x1_ptr, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x1_ptr + half, mask=mask, other=0.0).to(tl.float32)
        o1_ptr = o_ptr + t * stride_ot + heads[:, None] * stride_oh + dcols[None, :]
        tl.store(o1_ptr, (x1 * c - x2 * s).to(o_ptr.dtype.element_ty), mask=mask)
        tl.store(o1_ptr + half, (x2 * c + x1 * s).to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_qk_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr, Hq, Hk, half,
                    stride_qt, stride_qh, stride_kt, stride_kh,
                    stride_qot, stride_qoh, stride_kot, stride_koh, stride_cos, stride_sin,
                    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    dcols = tl.arange(0, BLOCK_D)
    dmask = dcols < half
    c = tl.load(cos_ptr + t * stride_cos + dcols, mask=dmask, other=0.0)[None, :]
    s = tl.load(sin_ptr + t * stride_sin + dcols, mask=dmask, other=0.0)[None, :]
    _rotate_heads(q_ptr, qo_ptr, t, Hq, half, stride_qt, stride_qh, stride_qot, stride_qoh,
                  c, s, dcols, dmask, BLOCK_HQ)
    _rotate_heads(k_ptr, ko_ptr, t, Hk, half, stride_kt, stride_kh, stride_kot, stride_koh,
                  c, s, dcols, dmask, BLOCK_HK)


def rope_neox_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rotate q [T, Hq, Dh] and k [T, Hk, Dh] (bf16) by per-token angles; return (q_out, k_out).

    cos, sin: [T, Dh/2] float32. With x1 = x[..., :Dh/2], x2 = x[..., Dh/2:] and c, s the
    token's row: out = cat(x1 * c - x2 * s, x2 * c + x1 * s), computed in float32, bf16 out.
    """
    assert q.ndim == 3 and k.ndim == 3 and q.stride(2) == 1 and k.stride(2) == 1
    assert cos.stride(1) == 1 and sin.stride(1) == 1
    T, Hq, Dh = q.shape
    Hk = k.shape[1]
    half = Dh // 2
    q_out = torch.empty((T, Hq, Dh), device=q.device, dtype=q.dtype)
    k_out = torch.empty((T, Hk, Dh), device=k.device, dtype=k.dtype)
    if T == 0 or half == 0:
        return q_out, k_out
    BLOCK_D = triton.next_power_of_2(half)
    max_h = max(1, _TILE // BLOCK_D)
    BLOCK_HQ = min(triton.next_power_of_2(max(Hq, 1)), max_h)
    BLOCK_HK = min(triton.next_power_of_2(max(Hk, 1)), max_h)
    num_warps = 4 if BLOCK_HQ * BLOCK_D >= 1024 else 2
    _rope_qk_kernel[(T,)](
        q, k, cos, sin, q_out, k_out, Hq, Hk, half,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        cos.stride(0), sin.stride(0),
        BLOCK_HQ=BLOCK_HQ, BLOCK_HK=BLOCK_HK, BLOCK_D=BLOCK_D, num_warps=num_warps,
    )
    return q_out, k_out
