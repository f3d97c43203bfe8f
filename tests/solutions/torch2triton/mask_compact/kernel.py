"""Stream compaction in Triton without a host sync: count, scan the counts, scatter.

1. Each program counts the True entries of its BLOCK of the mask.
2. One program turns the per-block counts into exclusive offsets (tl.cumsum over chunks of
   counts with a running carry) and writes the total, the count output.
3. Each program rescans its block of the mask (tl.cumsum), so that the j-th selected entry
   of the block goes to offset + j: it stores the value and the source index there, and
   fills its own output positions at or past the total with 0 and -1.
The mask is read twice (1 byte per entry), the selected values once, and every output
element is written exactly once; nothing waits for the host.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 4096
_SCAN_BLOCK = 1024


@triton.jit
def _count_kernel(mask_ptr, counts_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = tl.load(mask_ptr + offs, mask=offs < N, other=0).to(tl.int32)
    tl.store(counts_ptr + pid, tl.sum(m, axis=0))


@triton.jit
def _offsets_kernel(counts_ptr, offsets_ptr, count_ptr, num_blocks, SCAN_BLOCK: tl.constexpr):
    carry = tl.zeros([], dtype=tl.int64)
    for start in range(0, num_blocks, SCAN_BLOCK):
        b = start + tl.arange(0, SCAN_BLOCK)
        c = tl.load(counts_ptr + b, mask=b < num_blocks, other=0).to(tl.int64)
        tl.store(offsets_ptr + b, carry + tl.cumsum(c, axis=0) - c, mask=b < num_blocks)
        carry += tl.sum(c, axis=0)
    tl.store(count_ptr, carry)


@triton.jit
def _scatter_kernel(mask_ptr, values_ptr, offsets_ptr, count_ptr, out_val_ptr, out_idx_ptr, N,
                    BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < N
    m = tl.load(mask_ptr + offs, mask=inside, other=0).to(tl.int32)
    keep = m != 0
    dest = tl.load(offsets_ptr + pid) + tl.cumsum(m, axis=0).to(tl.int64) - 1
    v = tl.load(values_ptr + offs, mask=keep, other=0.0)
    tl.store(out_val_ptr + dest, v, mask=keep)
    tl.store(out_idx_ptr + dest, offs, mask=keep)
    # padding: this program's own output positions at or past the total
    pad = inside & (offs >= tl.load(count_ptr))
    tl.store(out_val_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=pad)
    tl.store(out_idx_ptr + offs, tl.full([BLOCK], -1, tl.int64), mask=pad)


def mask_compact(mask: torch.Tensor, values: torch.Tensor):
    """Return (out_values, count, out_idx): the selected values packed to the front, in order.

    mask: [N] torch.bool; values: [N] float32. With idx the positions where mask is True, in
    increasing order: out_values[:count] = values[idx], out_values[count:] = 0 (float32 [N]);
    count = len(idx) (a 0-dim int64 tensor on the device); out_idx[:count] = idx,
    out_idx[count:] = -1 (int64 [N]).
    """
    assert mask.ndim == 1 and mask.dtype == torch.bool and values.shape == mask.shape
    mask_u8 = mask.contiguous().view(torch.uint8)
    values = values.contiguous()
    N = mask.numel()
    dev = mask.device
    out_values = torch.empty((N,), device=dev, dtype=torch.float32)
    out_idx = torch.empty((N,), device=dev, dtype=torch.int64)
    count = torch.empty((), device=dev, dtype=torch.int64)
    num_blocks = max(1, triton.cdiv(N, _BLOCK))
    counts = torch.empty((num_blocks,), device=dev, dtype=torch.int32)
    offsets = torch.empty((num_blocks,), device=dev, dtype=torch.int64)
    _count_kernel[(num_blocks,)](mask_u8, counts, N, BLOCK=_BLOCK, num_warps=4)
    _offsets_kernel[(1,)](counts, offsets, count, num_blocks, SCAN_BLOCK=_SCAN_BLOCK,
                          num_warps=4)
    _scatter_kernel[(num_blocks,)](mask_u8, values, offsets, count, out_values, out_idx, N,
                                   BLOCK=_BLOCK, num_warps=4)
    return out_values, count, out_idx
