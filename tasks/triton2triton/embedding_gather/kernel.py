"""Embedding lookup out[i, :] = table[ids[i], :] in Triton (baseline: one program per
output row, walking the row in small chunks)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gather_kernel(ids_ptr, table_ptr, out_ptr, D, stride_t, stride_o, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    idx = tl.load(ids_ptr + row).to(tl.int64)
    src = table_ptr + idx * stride_t
    dst = out_ptr + row.to(tl.int64) * stride_o
    for start in range(0, D, BLOCK_D):
        offs = start + tl.arange(0, BLOCK_D)
        mask = offs < D
        vals = tl.load(src + offs, mask=mask)
        tl.store(dst + offs, vals, mask=mask)


def embedding_gather(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Return table[ids] as a new [N, D] tensor (table [V, D], ids [N] int32 or int64)."""
    N = ids.shape[0]
    D = table.shape[1]
    out = torch.empty((N, D), device=table.device, dtype=table.dtype)
    if N == 0:
        return out
    _gather_kernel[(N,)](ids, table, out, D, table.stride(0), out.stride(0),
                         BLOCK_D=128, num_warps=4)
    return out
