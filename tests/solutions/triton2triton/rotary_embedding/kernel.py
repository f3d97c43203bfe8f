"""Neox-style rotary position embedding (RoPE) for q and k in Triton.

One launch for both tensors; one program per token handles all of that token's q and k
heads as 2-D [heads, D/2] tiles, so cos/sin are gathered once per token and every load
and store is a wide, contiguous access."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_heads(x_ptr, o_ptr, t, n_heads, stride_xt, stride_xh, stride_ot, stride_oh,
                  cos, sin, offs_h, offs_d, dmask,
                  HALF: tl.constexpr):
    hmask = offs_h < n_heads
    mask = hmask[:, None] & dmask[None, :]
    x_ptrs = x_ptr + t * stride_xt + offs_h[:, None] * stride_xh + offs_d[None, :]
    o_ptrs = o_ptr + t * stride_ot + offs_h[:, None] * stride_oh + offs_d[None, :]
    x1 = tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptrs + HALF, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * cos[None, :] - x2 * sin[None, :]
    o2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(o_ptrs, o1.to(o_ptr.dtype.element_ty), mask=mask)
    tl.store(o_ptrs + HALF, o2.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_qk_kernel(
    q_ptr, k_ptr, qo_ptr, ko_ptr, pos_ptr, cos_ptr, sin_ptr,
    HQ, HK,
    stride_qt, stride_qh, stride_kt, stride_kh,
    stride_qot, stride_qoh, stride_kot, stride_koh,
    stride_cos, stride_sin,
    HALF: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < HALF
    pos = tl.load(pos_ptr + t)
    cos = tl.load(cos_ptr + pos * stride_cos + offs_d, mask=dmask, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + pos * stride_sin + offs_d, mask=dmask, other=0.0).to(tl.float32)
    _rotate_heads(q_ptr, qo_ptr, t, HQ, stride_qt, stride_qh, stride_qot, stride_qoh,
                  cos, sin, tl.arange(0, BLOCK_HQ), offs_d, dmask, HALF)
    _rotate_heads(k_ptr, ko_ptr, t, HK, stride_kt, stride_kh, stride_kot, stride_koh,
                  cos, sin, tl.arange(0, BLOCK_HK), offs_d, dmask, HALF)


def rotary_embedding(positions, q, k, cos_cache, sin_cache):
    """Apply neox-style RoPE to q [T, Hq, D] and k [T, Hk, D]; return new (q_rot, k_rot)."""
    T, HQ, D = q.shape
    HK = k.shape[1]
    assert k.shape[0] == T and k.shape[2] == D and D % 2 == 0
    assert q.stride(2) == 1 and k.stride(2) == 1
    assert cos_cache.stride(1) == 1 and sin_cache.stride(1) == 1
    half = D // 2
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    if T == 0:
        return q_out, k_out
    BLOCK_D = triton.next_power_of_2(half)
    BLOCK_HQ = triton.next_power_of_2(HQ)
    BLOCK_HK = triton.next_power_of_2(HK)
    elems = (BLOCK_HQ + BLOCK_HK) * BLOCK_D
    num_warps = 8 if elems >= 4096 else 4 if elems >= 1024 else 2
    _rope_qk_kernel[(T,)](
        q, k, q_out, k_out, positions, cos_cache, sin_cache,
        HQ, HK,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        cos_cache.stride(0), sin_cache.stride(0),
        HALF=half, BLOCK_D=BLOCK_D, BLOCK_HQ=BLOCK_HQ, BLOCK_HK=BLOCK_HK,
        num_warps=num_warps,
    )
    return q_out, k_out
