"""Causal scaled-dot-product attention forward in Triton (baseline: a simple flash-style
kernel with online softmax)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd_kernel(
    Q, K, V, Out,
    sm_scale,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    H, S,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    q_base = Q + b * stride_qb + h * stride_qh
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    o_base = Out + b * stride_ob + h * stride_oh

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)

    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=offs_m[:, None] < S, other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_D), dtype=tl.float32)

    # Walk over every key block; the causal mask zeroes the ones above the diagonal.
    for start_n in range(0, S, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[None, :] * stride_ks + offs_d[:, None] * stride_kd,
                    mask=cols[None, :] < S, other=0.0)
        qk = tl.dot(q, k) * sm_scale
        keep = (cols[None, :] <= offs_m[:, None]) & (cols[None, :] < S)
        qk = tl.where(keep, qk, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + cols[:, None] * stride_vs + offs_d[None, :] * stride_vd,
                    mask=cols[:, None] < S, other=0.0)
        acc += tl.dot(p.to(v.dtype), v)
        m_i = m_new

    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od,
             acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < S)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D) with a causal mask) @ v for q, k, v of shape [B, H, S, D]."""
    B, H, S, D = q.shape
    assert k.shape == q.shape and v.shape == q.shape and D in (16, 32, 64, 128, 256)
    o = torch.empty_like(q)
    BLOCK_M, BLOCK_N = 64, 32
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    _attn_fwd_kernel[grid](
        q, k, v, o, D**-0.5,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, S,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_D=D,
        num_warps=4, num_stages=2,
    )
    return o
