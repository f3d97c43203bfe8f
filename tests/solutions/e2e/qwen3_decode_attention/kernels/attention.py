"""Decode attention and the KV-cache write in Triton (one launch each); prefill stays torch.

attention_decode: one program per (batch row, kv head). The program holds the kv head's g
query heads as a [BLOCK_H, D] tile (padded to 16 rows so both products run on tensor cores),
walks the row's cache in BLOCK_N positions up to seq_lens[b] (read on the device: no host
sync, capturable in a CUDA graph), so every K/V block is loaded once for all g query heads,
and keeps an online softmax in fp32 (log2 domain). The products take fp32 operands: tf32
tensor cores on the GPU, exact for bf16 q and k (p is rounded to tf32, finer than bf16), and
Triton's CPU interpreter, whose bf16 tl.dot is broken, runs the same code. A row with
seq_lens[b] == 0 gets zeros.

kv_write: one program per token stores the token's k and v heads at cache[slots[t],
positions[t]] for both caches at once.
"""

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, lens_ptr, o_ptr, qk_scale, L, G, D,
                   stride_qb, stride_qh, stride_kb, stride_kl, stride_kh,
                   stride_vb, stride_vl, stride_vh, stride_ob, stride_oh,
                   BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1).to(tl.int64)
    offs_h = tl.arange(0, BLOCK_H)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < D
    qmask = (offs_h < G)[:, None] & dmask[None, :]
    heads = kvh * G + offs_h
    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=qmask, other=0.0).to(tl.float32)
    seq_len = tl.minimum(tl.load(lens_ptr + b).to(tl.int32), L)
    k_base = k_ptr + b * stride_kb + kvh * stride_kh
    v_base = v_ptr + b * stride_vb + kvh * stride_vh
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        pos = start + offs_n
        nmask = pos < seq_len
        kv_mask = nmask[:, None] & dmask[None, :]
        pos64 = pos.to(tl.int64)
        k = tl.load(k_base + pos64[:, None] * stride_kl + offs_d[None, :], mask=kv_mask,
                    other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # log2 domain
        s = tl.where(nmask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + pos64[:, None] * stride_vl + offs_d[None, :], mask=kv_mask,
                    other=0.0).to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(o_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=qmask)


@triton.jit
def _kv_write_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slots_ptr, pos_ptr, HK, D,
                     stride_kt, stride_kh, stride_vt, stride_vh,
                     stride_kcs, stride_kcl, stride_kch, stride_kcd,
                     stride_vcs, stride_vcl, stride_vch, stride_vcd,
                     BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots_ptr + t).to(tl.int64)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_h < HK)[:, None] & (offs_d < D)[None, :]
    k = tl.load(k_ptr + t * stride_kt + offs_h[:, None] * stride_kh + offs_d[None, :],
                mask=mask)
    v = tl.load(v_ptr + t * stride_vt + offs_h[:, None] * stride_vh + offs_d[None, :],
                mask=mask)
    kc = (kc_ptr + slot * stride_kcs + pos * stride_kcl + offs_h[:, None] * stride_kch
          + offs_d[None, :] * stride_kcd)
    vc = (vc_ptr + slot * stride_vcs + pos * stride_vcl + offs_h[:, None] * stride_vch
          + offs_d[None, :] * stride_vcd)
    tl.store(kc, k.to(kc_ptr.dtype.element_ty), mask=mask)
    tl.store(vc, v.to(vc_ptr.dtype.element_ty), mask=mask)


def attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      scale: float) -> torch.Tensor:
    """Causal attention of one sequence, GQA: the baseline's eager PyTorch, unchanged."""
    t, hq, _ = q.shape
    groups = hq // k.shape[1]
    query = q.transpose(0, 1)                                        # [Hq, T, D]
    key = k.repeat_interleave(groups, dim=1).transpose(0, 1)         # [Hq, T, D]
    value = v.repeat_interleave(groups, dim=1).transpose(0, 1)
    scores = torch.matmul(query, key.transpose(1, 2)) * scale       # [Hq, T, T]
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, value).transpose(0, 1).contiguous()  # [T, Hq, D]


def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    b, hq, d = q.shape
    cache_len, hk = k_cache.shape[1], k_cache.shape[2]
    group = hq // hk
    if q.stride(2) != 1:
        q = q.contiguous()
    if k_cache.stride(3) != 1:
        k_cache = k_cache.contiguous()
    if v_cache.stride(3) != 1:
        v_cache = v_cache.contiguous()
    out = torch.empty((b, hq, d), dtype=q.dtype, device=q.device)
    if b == 0:
        return out
    block_d = max(16, triton.next_power_of_2(d))
    block_h = max(16, triton.next_power_of_2(group))
    block_n = 64 if block_d <= 128 else 32
    _decode_kernel[(b, hk)](
        q, k_cache, v_cache, seq_lens, out, scale * _LOG2E, cache_len, group, d,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), out.stride(0), out.stride(1),
        BLOCK_H=block_h, BLOCK_N=block_n, BLOCK_D=block_d, num_warps=4, num_stages=2)
    return out


def kv_write(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             slots: torch.Tensor, positions: torch.Tensor) -> None:
    t, hk, d = k.shape
    if t == 0:
        return
    if k.stride(2) != 1:
        k = k.contiguous()
    if v.stride(2) != 1:
        v = v.contiguous()
    block_h = triton.next_power_of_2(hk)
    block_d = triton.next_power_of_2(d)
    num_warps = max(1, min(8, block_h * block_d // 256))
    _kv_write_kernel[(t,)](
        k, v, k_cache, v_cache, slots, positions, hk, d,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), k_cache.stride(3),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), v_cache.stride(3),
        BLOCK_H=block_h, BLOCK_D=block_d, num_warps=num_warps)
