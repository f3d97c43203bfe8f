"""Masked row softmax in Triton: x and the mask read once, y written once.

For D up to _MAX_SINGLE_BLOCK each program loads its whole row of x and of the mask (padded
to a power of two), sets masked positions to -inf, reduces max and sum in registers and
writes the bf16 result: one pass over HBM in each direction, one launch, no float32 or
masked copy of the scores. Wider rows fall back to an online (running max / rescaled sum)
pass and a normalizing pass that re-reads the row while it is still in L2. The bool mask is
read through a uint8 view of the same bytes.
"""

import torch
import triton
import triton.language as tl

_MAX_SINGLE_BLOCK = 16384
_LOOP_BLOCK = 4096
_MAX_WARPS = 16


@triton.jit
def _masked_softmax_row_kernel(x_ptr, m_ptr, y_ptr, D, stride_x, stride_m, stride_y,
                               BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    inside = cols < D
    x = tl.load(x_ptr + row * stride_x + cols, mask=inside, other=0.0).to(tl.float32)
    masked = tl.load(m_ptr + row * stride_m + cols, mask=inside, other=1) != 0
    s = tl.where(masked, -float("inf"), x * LOG2E)
    e = tl.exp2(s - tl.max(s, axis=0))
    y = e * (1.0 / tl.sum(e, axis=0))
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _masked_softmax_looped_kernel(x_ptr, m_ptr, y_ptr, D, stride_x, stride_m, stride_y,
                                  BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    m_row = m_ptr + row * stride_m
    y_row = y_ptr + row * stride_y
    # online pass: running max mx (log2 domain) and sum s rescaled when mx grows; a chunk
    # that is entirely masked leaves mx at -inf, so the exponents subtract a finite stand-in
    mx = -float("inf")
    s = 0.0
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = cols < D
        x = tl.load(x_row + cols, mask=inside, other=0.0).to(tl.float32)
        masked = tl.load(m_row + cols, mask=inside, other=1) != 0
        z = tl.where(masked, -float("inf"), x * LOG2E)
        mx_new = tl.maximum(mx, tl.max(z, axis=0))
        ref = tl.where(mx_new == -float("inf"), 0.0, mx_new)
        s = s * tl.exp2(mx - ref) + tl.sum(tl.exp2(z - ref), axis=0)
        mx = mx_new
    inv_s = 1.0 / s
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = cols < D
        x = tl.load(x_row + cols, mask=inside, other=0.0).to(tl.float32)
        masked = tl.load(m_row + cols, mask=inside, other=1) != 0
        z = tl.where(masked, -float("inf"), x * LOG2E)
        y = tl.exp2(z - mx) * inv_s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=inside)


def masked_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Return softmax over the last dim of x with masked positions (mask True) at -inf.

    x: [N, D] bfloat16 (float16 in the CPU smoke case), contiguous;
    mask: [N, D] bool, contiguous, True = masked out.
    Returns a new [N, D] tensor of x's dtype (masked positions are 0).
    """
    assert x.ndim == 2 and x.stride(1) == 1 and mask.shape == x.shape and mask.stride(1) == 1
    N, D = x.shape
    y = torch.empty((N, D), device=x.device, dtype=x.dtype)
    if N == 0 or D == 0:
        return y
    mask_bytes = mask.view(torch.uint8)
    BLOCK = max(16, triton.next_power_of_2(D))
    if BLOCK <= _MAX_SINGLE_BLOCK:
        num_warps = min(_MAX_WARPS, max(4, BLOCK // 512))  # about 16 elements per thread
        _masked_softmax_row_kernel[(N,)](x, mask_bytes, y, D, x.stride(0), mask_bytes.stride(0),
                                         y.stride(0), BLOCK=BLOCK, num_warps=num_warps)
    else:
        _masked_softmax_looped_kernel[(N,)](x, mask_bytes, y, D, x.stride(0),
                                            mask_bytes.stride(0), y.stride(0),
                                            BLOCK=_LOOP_BLOCK, num_warps=8)
    return y
