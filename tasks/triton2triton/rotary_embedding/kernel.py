"""Neox-style rotary position embedding (RoPE) for q and k in Triton (baseline: one launch
per tensor, one program per token that walks over the heads one at a time)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(
    x_ptr, out_ptr, pos_ptr, cos_ptr, sin_ptr,
    n_heads, half,
    stride_xt, stride_xh, stride_ot, stride_oh, stride_cos, stride_sin,
    BLOCK: tl.constexpr,
):
    t = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < half
    pos = tl.load(pos_ptr + t)
    cos = tl.load(cos_ptr + pos * stride_cos + offs, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + pos * stride_sin + offs, mask=mask, other=0.0).to(tl.float32)
    for h in range(n_heads):
        x_row = x_ptr + t * stride_xt + h * stride_xh
        x1 = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x_row + half + offs, mask=mask, other=0.0).to(tl.float32)
        o1 = x1 * cos - x2 * sin
        o2 = x2 * cos + x1 * sin
        o_row = out_ptr + t * stride_ot + h * stride_oh
        tl.store(o_row + offs, o1.to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(o_row + half + offs, o2.to(out_ptr.dtype.element_ty), mask=mask)


def _apply(x, positions, cos_cache, sin_cache):
    T, H, D = x.shape
    half = D // 2
    out = torch.empty_like(x)
    if x.numel() == 0:
        return out
    _rope_kernel[(T,)](
        x, out, positions, cos_cache, sin_cache,
        H, half,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        cos_cache.stride(0), sin_cache.stride(0),
        BLOCK=triton.next_power_of_2(half), num_warps=4 if half >= 64 else 2,
    )
    return out


def rotary_embedding(positions, q, k, cos_cache, sin_cache):
    """Apply neox-style RoPE to q [T, Hq, D] and k [T, Hk, D]; return new (q_rot, k_rot)."""
    return _apply(q, positions, cos_cache, sin_cache), _apply(k, positions, cos_cache, sin_cache)
