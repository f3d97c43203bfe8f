"""LayerNorm (with weight and bias) in Triton: one fused kernel, one pass over HBM.

For N up to _MAX_SINGLE_BLOCK a program keeps whole rows in registers. It loads weight and
bias once, then walks its ROWS rows; the load of the next row is issued before the current
row's reductions, so HBM traffic stays in flight while the row is normalized. x is read
from HBM exactly once, there is no stats buffer and no second launch. Wider rows use a
looped variant (its re-reads hit L2).
"""

import torch
import triton
import triton.language as tl

_MAX_SINGLE_BLOCK = 16384
_LOOP_BLOCK = 4096
_ROWS = 4
_ELEMS_PER_THREAD = 16
_MAX_WARPS = 16


@triton.jit
def _ln_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                    BLOCK: tl.constexpr, ROWS: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    cmask = cols < N
    first = tl.program_id(0).to(tl.int64) * ROWS
    x_next = tl.load(x_ptr + first * stride_x + cols, mask=cmask & (first < M), other=0.0)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    for r in range(ROWS):
        row = first + r
        x = x_next.to(tl.float32)
        # prefetch the next row of this program (fully masked on the last iteration)
        nxt = row + 1
        x_next = tl.load(x_ptr + nxt * stride_x + cols,
                         mask=cmask & (nxt < M) & (r + 1 < ROWS), other=0.0)
        mean = tl.sum(x, axis=0) / N
        xc = tl.where(cmask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / N + eps)
        y = xc * rstd * w + b
        tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty),
                 mask=cmask & (row < M))


@triton.jit
def _ln_looped_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               eps: float) -> torch.Tensor:
    x = x.contiguous()
    weight = weight.contiguous()
    bias = bias.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    if M == 0 or N == 0:
        return y
    BLOCK = triton.next_power_of_2(N)
    if BLOCK <= _MAX_SINGLE_BLOCK:
        num_warps = min(_MAX_WARPS, max(4, BLOCK // (32 * _ELEMS_PER_THREAD)))
        _ln_rows_kernel[(triton.cdiv(M, _ROWS),)](x, weight, bias, y, M, N, x.stride(0),
                                                  y.stride(0), eps, BLOCK=BLOCK, ROWS=_ROWS,
                                                  num_warps=num_warps)
    else:
        _ln_looped_kernel[(M,)](x, weight, bias, y, N, x.stride(0), y.stride(0), eps,
                                BLOCK=_LOOP_BLOCK, num_warps=8)
    return y
