"""Row-wise prefix sum in Triton: one pass, bf16 in, float32 out.

One program per row walks the row in BLOCK-wide chunks: each chunk is loaded once, scanned
in registers (tl.cumsum: per-thread, warp-shuffle and cross-warp steps), offset by the
running total of the previous chunks, and stored as float32. x is read from HBM exactly
once and the result written exactly once, with no float32 copy of x in between.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 4096


@triton.jit
def _cumsum_row_kernel(x_ptr, out_ptr, D, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    carry = 0.0  # sum of the previous chunks
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


def row_cumsum(x: torch.Tensor) -> torch.Tensor:
    """Return out[i, j] = sum_{k <= j} x[i, k] as a new float32 tensor [N, D].

    x: [N, D] bfloat16, contiguous.
    """
    assert x.ndim == 2 and x.stride(1) == 1
    N, D = x.shape
    out = torch.empty((N, D), device=x.device, dtype=torch.float32)
    if N == 0 or D == 0:
        return out
    BLOCK = max(16, min(_BLOCK, triton.next_power_of_2(D)))
    num_warps = min(8, max(1, BLOCK // 512))  # 16 elements per thread at BLOCK 4096
    _cumsum_row_kernel[(N,)](x, out, D, x.stride(0), out.stride(0), BLOCK=BLOCK,
                             num_warps=num_warps)
    return out
