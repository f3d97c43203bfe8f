"""Residual add + RMSNorm in Triton: one kernel, x and residual read from HBM once.

One program per row computes h = x + residual in float32, stores it rounded to bf16 as the
new residual, reduces sum(h^2) and writes out = h * rstd * weight. When H fills at least 3/4
of its power-of-two padding (and fits in _MAX_SINGLE_BLOCK), the whole row stays in
registers: one load of each input, one reduction, two stores. Otherwise (e.g. H = 5120,
padded to 8192) the row is walked in 2048-wide chunks with a vector accumulator, and the
second pass re-reads x and residual, which are still in L2. The eager baseline instead runs
about ten kernels with float32 intermediates (~60 bytes of traffic per element, not 8).
"""

import torch
import triton
import triton.language as tl

_MAX_SINGLE_BLOCK = 16384
_LOOP_BLOCK = 2048


@triton.jit
def _add_rms_row_kernel(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    offs = row * H + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(h_ptr + offs, h.to(h_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (h * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_rms_looped_kernel(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        h = x + r
        tl.store(h_ptr + base + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        acc += h * h
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / H + eps)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < H
        # re-read the inputs (L2 hits), not the new residual just stored: no read-after-write
        # through global memory, and out is computed from the same float32 sum as the stats
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + cols, ((x + r) * rstd * w).to(out_ptr.dtype.element_ty),
                 mask=mask)


def add_rms_norm_residual(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.contiguous()
    residual = residual.contiguous()
    weight = weight.contiguous()
    T, H = x.shape
    out = torch.empty_like(x)
    new_residual = torch.empty_like(x)
    if T == 0 or H == 0:
        return out, new_residual
    BLOCK = triton.next_power_of_2(H)
    if BLOCK <= _MAX_SINGLE_BLOCK and 4 * H >= 3 * BLOCK:
        num_warps = min(16, max(4, BLOCK // 512))  # about 16 elements per thread
        _add_rms_row_kernel[(T,)](x, residual, weight, out, new_residual, H, eps, BLOCK=BLOCK,
                                  num_warps=num_warps)
    else:
        block = min(_LOOP_BLOCK, BLOCK)
        _add_rms_looped_kernel[(T,)](x, residual, weight, out, new_residual, H, eps,
                                     BLOCK=block, num_warps=max(1, min(8, block // 256)))
    return out, new_residual
