"""Cross-entropy backward in Triton: one online log-sum-exp pass and one write pass per row.

A tiny kernel counts the non-ignored labels. The main kernel runs a persistent grid; each
program takes rows in turn. For a non-ignored row, pass 1 streams the bf16 logits in
BLOCK-wide chunks keeping an online log-sum-exp (chunk max, rescaled running sum, exp2 in the
log2 domain); pass 2 re-reads the row, writes (softmax - onehot) * grad / n_valid with the
label's subtraction done in float32, and never materializes anything else. The grid is sized
so that the rows in flight fit in L2 (about 32 MB), so the re-read of pass 2 is an L2 hit;
pass-1 loads ask L2 to keep the row, pass-2 loads and the streaming stores ask it not to.
An ignored row is only written (zeros), never read.
"""

import torch
import triton
import triton.language as tl

IGNORE_INDEX = -100
_BLOCK = 8192
_L2_ROWS_BYTES = 32 * 1024 * 1024


@triton.jit
def _count_valid_kernel(labels_ptr, count_ptr, B, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, B, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        labels = tl.load(labels_ptr + offs, mask=offs < B, other=IGNORE)
        acc += (labels != IGNORE).to(tl.float32)
    tl.store(count_ptr, tl.sum(acc, axis=0))


@triton.jit
def _ce_bwd_kernel(logits_ptr, labels_ptr, grad_ptr, count_ptr, dlogits_ptr, B, V, stride,
                   IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    scale = tl.load(grad_ptr) / tl.load(count_ptr)
    # int64 bounds make the loop variable int64: row * stride can pass 2^31
    for row in range(tl.program_id(0).to(tl.int64), B, tl.num_programs(0)):
        label = tl.load(labels_ptr + row)
        in_row = logits_ptr + row * stride
        out_row = dlogits_ptr + row * stride
        if label == IGNORE:
            for start in range(0, V, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                tl.store(out_row + cols, tl.zeros([BLOCK], dtype=dlogits_ptr.dtype.element_ty),
                         mask=cols < V, cache_modifier=".cs")
        else:
            m = -float("inf")  # running max, log2 domain
            s = 0.0  # running sum of 2^(x - m)
            for start in range(0, V, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                x = tl.load(in_row + cols, mask=cols < V, other=-float("inf"),
                            eviction_policy="evict_last").to(tl.float32) * LOG2E
                m_new = tl.maximum(m, tl.max(x, axis=0))
                s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new), axis=0)
                m = m_new
            lse = m + tl.log2(s)
            for start in range(0, V, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                mask = cols < V
                x = tl.load(in_row + cols, mask=mask, other=0.0,
                            eviction_policy="evict_first").to(tl.float32)
                p = tl.exp2(x * LOG2E - lse)
                g = tl.where(cols == label, p - 1.0, p) * scale
                tl.store(out_row + cols, g.to(dlogits_ptr.dtype.element_ty), mask=mask,
                         cache_modifier=".cs")


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2


def cross_entropy_backward(logits: torch.Tensor, labels: torch.Tensor,
                           grad: torch.Tensor) -> torch.Tensor:
    logits = logits.contiguous()
    labels = labels.contiguous()
    grad = grad.contiguous()
    B, V = logits.shape
    dlogits = torch.empty_like(logits)
    if B == 0 or V == 0:
        return dlogits
    count = torch.empty((), device=logits.device, dtype=torch.float32)
    _count_valid_kernel[(1,)](labels, count, B, IGNORE=IGNORE_INDEX, BLOCK=1024, num_warps=4)
    block = min(_BLOCK, triton.next_power_of_2(V))
    num_warps = max(1, min(16, block // 512))  # 16 values per thread at BLOCK 8192
    # at least one program per SM; more when rows are short enough to stay in L2
    row_bytes = V * logits.element_size()
    programs = max(_num_sms(logits.device), _L2_ROWS_BYTES // row_bytes)
    programs = min(B, programs)
    _ce_bwd_kernel[(programs,)](logits, labels, grad, count, dlogits, B, V, logits.stride(0),
                                IGNORE=IGNORE_INDEX, BLOCK=block, num_warps=num_warps)
    return dlogits
