"""Gradient clipping by global L2 norm in Triton: two launches, no host synchronisation.

1. A fixed grid of at most _MAX_PARTIALS programs walks g with a grid stride, each keeping a
   float32 vector of squares and writing one partial sum.
2. Every program of the scaling kernel reduces the (at most _MAX_PARTIALS, from L2) partials
   in the same order, so all of them compute the identical norm and coefficient; it scales
   its 8192-element block and program 0 stores the norm. Blocks go in reverse order, so the
   first ones re-read the end of g from L2 (up to ~50 MB of the second read is saved).
g is read twice and the clipped gradient written once; the eager norm, division, clamp and
multiply kernels and their temporaries are gone.
"""

import torch
import triton
import triton.language as tl

_MAX_PARTIALS = 1024
_SUM_BLOCK = 4096
_SCALE_BLOCK = 8192


@triton.jit
def _sum_squares_kernel(g_ptr, partial_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    stride = tl.num_programs(0) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(pid * BLOCK, N, stride):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(g_ptr + offs, mask=offs < N, other=0.0)
        acc += x * x
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _clip_kernel(
    g_ptr,
    partial_ptr,
    out_ptr,
    norm_ptr,
    N,
    num_partials,
    max_norm,
    BLOCK: tl.constexpr,
    PARTIALS: tl.constexpr,
):
    # blocks in reverse order: the first programs scheduled re-read the end of g, which the
    # sum kernel read last and which is still in L2
    block = tl.num_programs(0) - 1 - tl.program_id(0)
    idx = tl.arange(0, PARTIALS)
    partials = tl.load(partial_ptr + idx, mask=idx < num_partials, other=0.0)
    norm = tl.sqrt(tl.sum(partials, axis=0))
    coef = tl.minimum(max_norm / (norm + 1e-6), 1.0)
    offs = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(g_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * coef, mask=mask)
    if tl.program_id(0) == 0:
        tl.store(norm_ptr, norm)


def grad_norm_clip(g: torch.Tensor, max_norm: float):
    g = g.contiguous()
    N = g.numel()
    clipped = torch.empty_like(g)
    norm = torch.empty((), device=g.device, dtype=torch.float32)
    sum_block = min(_SUM_BLOCK, triton.next_power_of_2(max(N, 1)))
    num_partials = max(1, min(_MAX_PARTIALS, triton.cdiv(N, sum_block)))
    partials = torch.empty((num_partials,), device=g.device, dtype=torch.float32)
    _sum_squares_kernel[(num_partials,)](
        g, partials, N, BLOCK=sum_block, num_warps=max(1, min(8, sum_block // 512))
    )
    scale_block = min(_SCALE_BLOCK, triton.next_power_of_2(max(N, 1)))
    _clip_kernel[(max(1, triton.cdiv(N, scale_block)),)](
        g,
        partials,
        clipped,
        norm,
        N,
        num_partials,
        max_norm,
        BLOCK=scale_block,
        PARTIALS=triton.next_power_of_2(num_partials),
        num_warps=max(1, min(8, scale_block // 1024)),
    )
    return clipped, norm
