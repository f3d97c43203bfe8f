"""Row softmax in Triton.

One program per row. The row is walked in BLOCK-wide chunks three times: once for the
maximum, once for the sum of exponentials, and once to write the normalized values.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y

    # pass 1: row maximum
    row_max = -float("inf")
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        row_max = tl.maximum(row_max, tl.max(x, axis=0))

    # pass 2: sum of exponentials
    row_sum = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        row_sum += tl.sum(tl.exp(x - row_max), axis=0)

    # pass 3: normalize and store
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    BLOCK = 1024
    _softmax_kernel[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=4)
    return y
