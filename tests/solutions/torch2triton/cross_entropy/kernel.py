"""Mean cross-entropy loss in Triton: one streaming pass over the bf16 logits.

One program per row walks the vocabulary in BLOCK-wide chunks, keeping an online
log-sum-exp (running max, sum rescaled when the max grows; exp2 in the log2 domain), and
picks the target logit with one scalar load. Each row's loss goes to a float32 buffer; the
mean over B rows is a tiny second step. The logits are read from HBM exactly once and
never materialized in float32.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 8192


@triton.jit
def _ce_row_kernel(logits_ptr, targets_ptr, loss_ptr, V, stride_row, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    LN2: tl.constexpr = 0.6931471805599453
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * stride_row
    m = -float("inf")  # running max, log2 domain
    s = 0.0  # running sum of 2^(x - m)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        x = x * LOG2E
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new), axis=0)
        m = m_new
    lse = (m + tl.log2(s)) * LN2
    target = tl.load(targets_ptr + row)
    picked = tl.load(row_ptr + target).to(tl.float32)
    tl.store(loss_ptr + row, lse - picked)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = logits.contiguous()
    targets = targets.contiguous()
    B, V = logits.shape
    losses = torch.empty((B,), device=logits.device, dtype=torch.float32)
    BLOCK = min(_BLOCK, triton.next_power_of_2(V))
    num_warps = min(8, max(1, BLOCK // 1024))  # 32 elements per thread at BLOCK 8192
    _ce_row_kernel[(B,)](logits, targets, losses, V, logits.stride(0), BLOCK=BLOCK,
                         num_warps=num_warps)
    return losses.mean()
