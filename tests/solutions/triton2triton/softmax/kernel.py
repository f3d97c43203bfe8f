"""Row softmax in Triton: the whole row stays in registers, one read and one write.

For N up to _MAX_SINGLE_BLOCK each program loads its entire row once (padded to a power of
two), reduces max and sum in registers, and writes the result: exactly one pass over HBM
in each direction, one launch. Wider rows fall back to an online (running max / rescaled
sum) pass followed by a normalizing pass, which re-reads the row while it is still in L2.
"""

import torch
import triton
import triton.language as tl

_MAX_SINGLE_BLOCK = 32768
_LOOP_BLOCK = 4096
_MAX_WARPS = 16


@triton.jit
def _softmax_row_kernel(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32) * LOG2E
    e = tl.exp2(x - tl.max(x, axis=0))
    y = e * (1.0 / tl.sum(e, axis=0))
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_looped_kernel(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    # online pass: running max m (log2 domain) and sum s rescaled when m grows
    m = -float("inf")
    s = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf")).to(tl.float32) * LOG2E
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new), axis=0)
        m = m_new
    inv_s = 1.0 / s
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32) * LOG2E
        y = tl.exp2(x - m) * inv_s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    if M == 0 or N == 0:
        return y
    BLOCK = triton.next_power_of_2(N)
    if BLOCK <= _MAX_SINGLE_BLOCK:
        # about 16-64 elements per thread
        num_warps = min(_MAX_WARPS, max(4, BLOCK // 512))
        _softmax_row_kernel[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK=BLOCK,
                                  num_warps=num_warps)
    else:
        _softmax_looped_kernel[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK=_LOOP_BLOCK,
                                     num_warps=8)
    return y
