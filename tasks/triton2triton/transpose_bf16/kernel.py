"""Transpose of a bf16 matrix [M, N] into a contiguous [N, M] tensor, in Triton.

One program per (row, block of columns): it reads BLOCK consecutive elements of one row of x
(coalesced) and writes each of them into a different row of out, M elements apart.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _transpose_row_kernel(x_ptr, out_ptr, M, N, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    vals = tl.load(x_ptr + row * stride_x + cols, mask=mask)
    tl.store(out_ptr + cols.to(tl.int64) * stride_out + row, vals, mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    BLOCK = 1024
    _transpose_row_kernel[(M, triton.cdiv(N, BLOCK))](x, out, M, N, x.stride(0), out.stride(0),
                                                      BLOCK=BLOCK, num_warps=4)
    return out
