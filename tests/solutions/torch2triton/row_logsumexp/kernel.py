"""Row-wise log-sum-exp in Triton: one streaming pass over the bf16 rows.

One program per row walks the row in BLOCK-wide chunks, keeping an online log-sum-exp:
the chunk's maximum updates the running maximum m, the running sum s of 2^(x - m) is
rescaled when m grows, and each element costs one exp2 (log2 domain). x is read from HBM
exactly once and never materialized in float32; each row writes one float32.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 8192


@triton.jit
def _lse_row_kernel(x_ptr, out_ptr, D, stride_row, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    LN2: tl.constexpr = 0.6931471805599453
    row = tl.program_id(0).to(tl.int64)
    row_ptr = x_ptr + row * stride_row
    m = -float("inf")  # running max, log2 domain
    s = 0.0  # running sum of 2^(x - m)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < D, other=-float("inf")).to(tl.float32)
        x = x * LOG2E
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new), axis=0)
        m = m_new
    tl.store(out_ptr + row, (m + tl.log2(s)) * LN2)


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    """Return out[i] = log(sum_j exp(x[i, j])) as a float32 tensor [N].

    x: [N, D] bfloat16, contiguous.
    """
    assert x.ndim == 2 and x.stride(1) == 1
    N, D = x.shape
    out = torch.empty((N,), device=x.device, dtype=torch.float32)
    if N == 0:
        return out
    BLOCK = max(16, min(_BLOCK, triton.next_power_of_2(D)))
    num_warps = min(8, max(1, BLOCK // 1024))  # 32 elements per thread at BLOCK 8192
    _lse_row_kernel[(N,)](x, out, D, x.stride(0), BLOCK=BLOCK, num_warps=num_warps)
    return out
