"""Grouped-query decode attention in Triton: split-K flash decoding, the cache read once.

The first kernel runs one program per (sequence, kv head, split of the sequence). It loads
the G query heads that share the kv head as one [BLOCK_G, D] tile, walks its slice of the
first seq_len cache positions in BLOCK_N-row tiles, and keeps an online softmax (running
max and sum in the log2 domain) with a float32 accumulator for p @ v. So every key and
value row is read from HBM once for all G query heads, and positions past seq_len are never
read. Each program writes its partial output (normalised) and log-sum-exp; a second small
kernel merges the splits of each query head. The products use tl.dot on float32 operands
(tf32 tensor cores on NVIDIA: bf16 values are exact in tf32, so q.k is exact up to float32
accumulation); this also keeps Triton's CPU interpreter, whose bf16 tl.dot is broken, on
the same code path.
"""

import torch
import triton
import triton.language as tl

_BLOCK_N = 64
_TARGET_PROGRAMS = 1024  # about 8 per SM on an H200
_MIN_CHUNK = 256  # fewest cache positions worth a split of their own


@triton.jit
def _decode_split_kernel(q_ptr, k_ptr, v_ptr, lens_ptr, mid_o_ptr, mid_lse_ptr,
                         Hkv, G, num_splits, qk_scale,
                         stride_qb, stride_qh, stride_kb, stride_kh, stride_ks,
                         stride_vb, stride_vh, stride_vs,
                         D: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // Hkv
    kh = pid % Hkv
    seq_len = tl.load(lens_ptr + b)
    chunk = tl.cdiv(tl.cdiv(seq_len, num_splits), BLOCK_N) * BLOCK_N
    start = split * chunk
    end = tl.minimum(start + chunk, seq_len)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    g_mask = offs_g < G
    heads = kh * G + offs_g  # query heads of this kv head
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh
                + offs_d[None, :], mask=g_mask[:, None], other=0.0).to(tl.float32)
    k_base = k_ptr + b.to(tl.int64) * stride_kb + kh.to(tl.int64) * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + kh.to(tl.int64) * stride_vh

    m = tl.full([BLOCK_G], -float("inf"), dtype=tl.float32)
    l_sum = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, D], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        pos = n0 + offs_n
        n_mask = pos < end
        k = tl.load(k_base + pos[:, None].to(tl.int64) * stride_ks + offs_d[None, :],
                    mask=n_mask[:, None], other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BLOCK_G, BLOCK_N], log2 domain
        s = tl.where(n_mask[None, :], s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + pos[:, None].to(tl.int64) * stride_vs + offs_d[None, :],
                    mask=n_mask[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m = m_new

    # An empty split (start >= end) stores lse = -inf and zeros: it gets no weight.
    has = l_sum > 0.0
    lse = tl.where(has, m + tl.log2(tl.where(has, l_sum, 1.0)), -float("inf"))
    out = acc / tl.where(has, l_sum, 1.0)[:, None]
    row = (b * Hkv * G + heads).to(tl.int64) * num_splits + split  # [BLOCK_G]
    tl.store(mid_lse_ptr + row, lse, mask=g_mask)
    tl.store(mid_o_ptr + row[:, None] * D + offs_d[None, :], out, mask=g_mask[:, None])


@triton.jit
def _decode_merge_kernel(mid_o_ptr, mid_lse_ptr, out_ptr, num_splits, stride_ob, stride_oh,
                         Hq, D: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(0)  # b * Hq + h
    b = row // Hq
    h = row % Hq
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    s_mask = offs_s < num_splits
    base = row.to(tl.int64) * num_splits
    lse = tl.load(mid_lse_ptr + base + offs_s, mask=s_mask, other=-float("inf"))
    m = tl.max(lse, axis=0)  # finite: split 0 always holds position 0
    w = tl.exp2(lse - m)
    o = tl.load(mid_o_ptr + (base + offs_s)[:, None] * D + offs_d[None, :],
                mask=s_mask[:, None], other=0.0)
    out = tl.sum(o * w[:, None], axis=0) / tl.sum(w, axis=0)
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d,
             out.to(out_ptr.dtype.element_ty))


def attention_decode_gqa(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         seq_lens: torch.Tensor) -> torch.Tensor:
    """Return out [B, Hq, D] bf16: softmax(q k^T / sqrt(D) over positions < seq_lens[b]) v.

    q: [B, Hq, D] bf16; k_cache, v_cache: [B, Hkv, S_max, D] bf16 with Hq = G * Hkv (query
    head h reads kv head h // G); seq_lens: [B] int32 in [1, S_max].
    """
    assert q.stride(2) == 1 and k_cache.stride(3) == 1 and v_cache.stride(3) == 1
    B, Hq, D = q.shape
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hkv
    assert triton.next_power_of_2(D) == D and Hq == G * Hkv
    out = torch.empty((B, Hq, D), device=q.device, dtype=q.dtype)
    if B == 0:
        return out
    seq_lens = seq_lens.contiguous()
    num_splits = max(1, min(triton.cdiv(S, _MIN_CHUNK), triton.cdiv(_TARGET_PROGRAMS, B * Hkv)))
    mid_o = torch.empty((B * Hq, num_splits, D), device=q.device, dtype=torch.float32)
    mid_lse = torch.empty((B * Hq, num_splits), device=q.device, dtype=torch.float32)
    BLOCK_G = max(16, triton.next_power_of_2(G))  # tl.dot needs at least 16 rows
    qk_scale = D ** -0.5 * 1.4426950408889634  # 1/sqrt(D) and log2(e)
    _decode_split_kernel[(B * Hkv, num_splits)](
        q, k_cache, v_cache, seq_lens, mid_o, mid_lse, Hkv, G, num_splits, qk_scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        D=D, BLOCK_G=BLOCK_G, BLOCK_N=_BLOCK_N, num_warps=4, num_stages=3,
    )
    _decode_merge_kernel[(B * Hq,)](
        mid_o, mid_lse, out, num_splits, out.stride(0), out.stride(1), Hq,
        D=D, BLOCK_S=triton.next_power_of_2(num_splits), num_warps=4,
    )
    return out
