"""Mean-pooled embedding bags in Triton: each looked-up row read once, nothing materialised.

One program per (bag, D-block): it loads BLOCK_L of the bag's ids at a time, gathers those
BLOCK_L table rows as one [BLOCK_L, BLOCK_D] tile (many independent row loads in flight),
adds them into a float32 tile accumulator, and at the end reduces over the bag, divides by L
and writes one bf16 row. The [B, L, D] gather and its float32 copy that the eager baseline
writes and re-reads never exist.
"""

import torch
import triton
import triton.language as tl

_MAX_BLOCK_D = 512
_TILE = 4096  # elements per gathered tile: 32 rows of 128, 8 rows of 512


@triton.jit
def _bag_mean_kernel(idx_ptr, w_ptr, out_ptr, L, D, stride_idx, stride_w, stride_out,
                     BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    bag = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < D
    acc = tl.zeros((BLOCK_L, BLOCK_D), dtype=tl.float32)
    for start in range(0, L, BLOCK_L):
        ls = start + tl.arange(0, BLOCK_L)
        l_ok = ls < L
        ids = tl.load(idx_ptr + bag * stride_idx + ls, mask=l_ok, other=0)
        rows = tl.load(w_ptr + ids[:, None] * stride_w + cols[None, :],
                       mask=l_ok[:, None] & col_ok[None, :], other=0.0)
        acc += rows.to(tl.float32)
    mean = tl.sum(acc, axis=0) / L
    tl.store(out_ptr + bag * stride_out + cols, mean.to(out_ptr.dtype.element_ty), mask=col_ok)


def embedding_bag_mean(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Return out [B, D] (weight's dtype) with out[b, :] = mean_l weight[indices[b, l], :].

    indices: [B, L] int64 with values in [0, V), contiguous; weight: [V, D] bfloat16,
    contiguous. The sum is accumulated in float32 and rounded once.
    """
    assert indices.ndim == 2 and weight.ndim == 2 and weight.stride(1) == 1
    indices = indices.contiguous()
    B, L = indices.shape
    D = weight.shape[1]
    out = torch.empty((B, D), device=weight.device, dtype=weight.dtype)
    if B == 0 or D == 0:
        return out
    BLOCK_D = min(_MAX_BLOCK_D, triton.next_power_of_2(D))
    BLOCK_L = max(1, min(triton.next_power_of_2(L), _TILE // BLOCK_D))
    num_warps = 4 if BLOCK_L * BLOCK_D >= 2048 else 2
    grid = (B, triton.cdiv(D, BLOCK_D))
    _bag_mean_kernel[grid](indices, weight, out, L, D, indices.stride(0), weight.stride(0),
                           out.stride(0), BLOCK_L=BLOCK_L, BLOCK_D=BLOCK_D, num_warps=num_warps)
    return out
