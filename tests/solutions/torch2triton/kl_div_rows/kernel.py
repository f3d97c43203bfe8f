"""Per-row distillation KL divergence in Triton: one streaming pass over both logit tensors.

One program per row walks the vocabulary in BLOCK-wide chunks, keeping two online
log-sum-exps (log2 domain, scaled by 1 / T) and, rescaled with the teacher's, the running sum
W = sum_j 2^(a_j - m_a) * (a_j - b_j), where a = t / T and b = s / T. Then
    KL = ln 2 * (W / Z_a - (m_a - m_b) - log2(Z_a / Z_b)),
which subtracts the two row maxima exactly and the sums as one ratio, so the large
log-sum-exps never cancel in float32. s and t are read from HBM once, never materialized in
float32.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 4096


@triton.jit
def _kl_row_kernel(s_ptr, t_ptr, out_ptr, V, stride_s, stride_t, scale, BLOCK: tl.constexpr):
    LN2: tl.constexpr = 0.6931471805599453
    row = tl.program_id(0).to(tl.int64)
    s_row = s_ptr + row * stride_s
    t_row = t_ptr + row * stride_t
    m_a = -float("inf")  # teacher running max (log2 domain)
    m_b = -float("inf")  # student running max
    z_a = 0.0  # sum of 2^(a - m_a)
    z_b = 0.0  # sum of 2^(b - m_b)
    w = 0.0  # sum of 2^(a - m_a) * (a - b)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < V
        # masked lanes: a = b = 0 in the difference, -inf for the maxima and exponentials
        a = tl.load(t_row + cols, mask=mask, other=0.0).to(tl.float32) * scale
        b = tl.load(s_row + cols, mask=mask, other=0.0).to(tl.float32) * scale
        a_lse = tl.where(mask, a, -float("inf"))
        b_lse = tl.where(mask, b, -float("inf"))
        m_a_new = tl.maximum(m_a, tl.max(a_lse, axis=0))
        alpha = tl.exp2(m_a - m_a_new)
        p = tl.exp2(a_lse - m_a_new)
        z_a = z_a * alpha + tl.sum(p, axis=0)
        w = w * alpha + tl.sum(p * (a - b), axis=0)
        m_a = m_a_new
        m_b_new = tl.maximum(m_b, tl.max(b_lse, axis=0))
        z_b = z_b * tl.exp2(m_b - m_b_new) + tl.sum(tl.exp2(b_lse - m_b_new), axis=0)
        m_b = m_b_new
    kl = (w / z_a - (m_a - m_b) - tl.log2(z_a / z_b)) * LN2
    tl.store(out_ptr + row, kl)


def kl_div_rows(s: torch.Tensor, t: torch.Tensor, temperature: float) -> torch.Tensor:
    s = s.contiguous()
    t = t.contiguous()
    B, V = s.shape
    out = torch.empty((B,), device=s.device, dtype=torch.float32)
    if B == 0:
        return out
    BLOCK = min(_BLOCK, triton.next_power_of_2(V))
    num_warps = min(8, max(1, BLOCK // 512))  # 16 bf16 values per thread and tensor at 4096
    scale = 1.4426950408889634 / temperature  # log2(e) / T
    _kl_row_kernel[(B,)](s, t, out, V, s.stride(0), t.stride(0), scale, BLOCK=BLOCK, num_warps=num_warps)
    return out
