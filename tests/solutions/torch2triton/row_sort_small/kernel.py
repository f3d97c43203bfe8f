"""Row-wise ascending sort with indices in Triton: one program per row, sorted in registers.

Each value's float32 bits are mapped to an int32 whose signed order is the float order
(negative floats get their 31 magnitude bits flipped), shifted into the high half of an
int64 whose low half holds the column index. One tl.sort (a bitonic network in registers)
of these keys then orders values and carries the indices with them; unpacking the sorted
keys gives both outputs without a second read of x. Columns past N (the row padded to a
power of two) get +inf keys with indices >= N, which sort to the end and are not stored.
x is read once and the values and indices written once.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _sort_rows_kernel(x_ptr, val_ptr, idx_ptr, N, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("inf"))
    bits = x.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # signed int order == float order
    keys = (ordered.to(tl.int64) << 32) | cols.to(tl.int64)
    keys = tl.sort(keys, dim=0)
    idx = keys & 0xFFFFFFFF
    ordered = (keys >> 32).to(tl.int32)
    bits = ordered ^ ((ordered >> 31) & 0x7FFFFFFF)
    out = row * stride_out + cols
    tl.store(val_ptr + out, bits.to(tl.float32, bitcast=True), mask=mask)
    tl.store(idx_ptr + out, idx, mask=mask)


def row_sort_small(x: torch.Tensor):
    """Return (values, indices): every row of x sorted ascending, and where each value came from.

    x: [M, N] float32, contiguous, N <= 2048, the values of a row distinct. values: float32
    [M, N] with values[i, j] = x[i, indices[i, j]]; indices: int64 [M, N].
    """
    assert x.ndim == 2 and x.stride(1) == 1 and x.dtype == torch.float32
    M, N = x.shape
    values = torch.empty((M, N), device=x.device, dtype=torch.float32)
    indices = torch.empty((M, N), device=x.device, dtype=torch.int64)
    if M == 0 or N == 0:
        return values, indices
    BLOCK = triton.next_power_of_2(N)
    num_warps = min(8, max(1, BLOCK // 256))  # 8 keys per thread
    _sort_rows_kernel[(M,)](x, values, indices, N, x.stride(0), values.stride(0), BLOCK=BLOCK,
                            num_warps=num_warps)
    return values, indices
