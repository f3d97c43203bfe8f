"""Top-8 softmax probabilities in Triton: one streaming pass over the bf16 logits.

One program per row walks the vocabulary in BLOCK-wide chunks. For each chunk it updates an
online softmax denominator (running max, rescaled sum of exp2 in the log2 domain), and, only
when the chunk's maximum beats the smallest of the 8 candidates kept so far, merges the
chunk's best values into the candidates (8 rounds of max-with-index; a round replaces the
smallest candidate when it is beaten). At the end the 8 candidates are ordered by 8 rounds
of max and turned into probabilities with the row's final max and sum. The logits are read
from HBM once; no float32 copy and no [M, V] probability tensor is ever written.
"""

import torch
import triton
import triton.language as tl

TOP_K = 8
_BLOCK = 8192


@triton.jit
def _topk_softmax_kernel(x_ptr, val_ptr, idx_ptr, V, stride_x,
                         K: tl.constexpr, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    cols = tl.arange(0, BLOCK)
    kcols = tl.arange(0, K)
    m = -float("inf")  # running max, log2 domain
    s = 0.0  # running sum of 2^(x * log2(e) - m)
    top = tl.full([K], -float("inf"), tl.float32)  # candidates, unordered
    top_id = tl.zeros([K], dtype=tl.int32)
    for start in range(0, V, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < V,
                    other=-float("inf")).to(tl.float32)
        x_max = tl.max(x, axis=0)
        m_new = tl.maximum(m, x_max * LOG2E)
        s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(x * LOG2E - m_new), axis=0)
        m = m_new
        if x_max > tl.min(top, axis=0):
            for _ in tl.static_range(K):
                best, best_at = tl.max(x, axis=0, return_indices=True)
                worst, worst_at = tl.min(top, axis=0, return_indices=True)
                # (the comparison is made on vectors: the interpreter cannot & a scalar)
                replace = (kcols == worst_at) & (tl.zeros([K], tl.float32) + best > worst)
                top = tl.where(replace, best, top)
                top_id = tl.where(replace, start + best_at, top_id)
                x = tl.where(cols == best_at, -float("inf"), x)
    # order the candidates, largest first, and turn them into probabilities
    inv_s = 1.0 / s
    out = row * K
    for j in tl.static_range(K):
        best, best_at = tl.max(top, axis=0, return_indices=True)
        best_id = tl.sum(tl.where(kcols == best_at, top_id, 0), axis=0)
        tl.store(val_ptr + out + j, tl.exp2(best * LOG2E - m) * inv_s)
        tl.store(idx_ptr + out + j, best_id.to(tl.int64))
        top = tl.where(kcols == best_at, -float("inf"), top)


def topk_softmax_probs(logits: torch.Tensor):
    """Return (values, indices): the 8 largest softmax probabilities of every row, descending.

    logits: [M, V] bfloat16, contiguous. values: float32 [M, 8], the probabilities
    softmax(logits[i, :]) at indices[i, :]; indices: int64 [M, 8].
    """
    assert logits.ndim == 2 and logits.stride(1) == 1
    M, V = logits.shape
    assert V >= TOP_K
    values = torch.empty((M, TOP_K), device=logits.device, dtype=torch.float32)
    indices = torch.empty((M, TOP_K), device=logits.device, dtype=torch.int64)
    if M == 0:
        return values, indices
    BLOCK = min(_BLOCK, triton.next_power_of_2(V))
    num_warps = min(8, max(1, BLOCK // 1024))  # 32 logits per thread at BLOCK 8192
    _topk_softmax_kernel[(M,)](logits, values, indices, V, logits.stride(0),
                               K=TOP_K, BLOCK=BLOCK, num_warps=num_warps)
    return values, indices
