"""NeoX rotary embedding of q and k in one Triton launch.

One program per token: it gathers cos/sin of the token's position once (cos_sin[pos, :D/2]
is cos, cos_sin[pos, D/2:] is sin, fp32) and rotates all of the token's q heads and k heads
as [heads, D/2] tiles in fp32. q and k may be strided views (e.g. slices of a fused qkv
projection); the outputs are new contiguous tensors of the inputs' dtype.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_heads(x_ptr, o_ptr, t, n_heads, stride_xt, stride_xh, stride_ot, stride_oh,
                  cos, sin, offs_d, dmask, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    offs_h = tl.arange(0, BLOCK_H)
    mask = (offs_h < n_heads)[:, None] & dmask[None, :]
    x_ptrs = x_ptr + t * stride_xt + offs_h[:, None] * stride_xh + offs_d[None, :]
    o_ptrs = o_ptr + t * stride_ot + offs_h[:, None] * stride_oh + offs_d[None, :]
    x1 = tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptrs + HALF, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * cos[None, :] - x2 * sin[None, :]
    o2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(o_ptrs, o1.to(o_ptr.dtype.element_ty), mask=mask)
    tl.store(o_ptrs + HALF, o2.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_kernel(q_ptr, k_ptr, qo_ptr, ko_ptr, pos_ptr, cs_ptr, HQ, HK,
                   stride_qt, stride_qh, stride_kt, stride_kh,
                   stride_qot, stride_qoh, stride_kot, stride_koh, stride_cs,
                   HALF: tl.constexpr, BLOCK_D: tl.constexpr,
                   BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < HALF
    pos = tl.load(pos_ptr + t).to(tl.int64)
    cos = tl.load(cs_ptr + pos * stride_cs + offs_d, mask=dmask, other=0.0).to(tl.float32)
    sin = tl.load(cs_ptr + pos * stride_cs + HALF + offs_d, mask=dmask,
                  other=0.0).to(tl.float32)
    _rotate_heads(q_ptr, qo_ptr, t, HQ, stride_qt, stride_qh, stride_qot, stride_qoh,
                  cos, sin, offs_d, dmask, HALF, BLOCK_HQ)
    _rotate_heads(k_ptr, ko_ptr, t, HK, stride_kt, stride_kh, stride_kot, stride_koh,
                  cos, sin, offs_d, dmask, HALF, BLOCK_HK)


def rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
           cos_sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    t, hq, d = q.shape
    hk = k.shape[1]
    if q.stride(2) != 1:
        q = q.contiguous()
    if k.stride(2) != 1:
        k = k.contiguous()
    if cos_sin.stride(1) != 1:
        cos_sin = cos_sin.contiguous()
    q_out = torch.empty((t, hq, d), dtype=q.dtype, device=q.device)
    k_out = torch.empty((t, hk, d), dtype=k.dtype, device=k.device)
    if t == 0:
        return q_out, k_out
    half = d // 2
    block_d = triton.next_power_of_2(half)
    block_hq = triton.next_power_of_2(hq)
    block_hk = triton.next_power_of_2(hk)
    elems = (block_hq + block_hk) * block_d
    num_warps = 8 if elems >= 4096 else 4 if elems >= 1024 else 2 if elems >= 256 else 1
    _rotary_kernel[(t,)](
        q, k, q_out, k_out, positions, cos_sin, hq, hk,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1), cos_sin.stride(0),
        HALF=half, BLOCK_D=block_d, BLOCK_HQ=block_hq, BLOCK_HK=block_hk,
        num_warps=num_warps)
    return q_out, k_out
