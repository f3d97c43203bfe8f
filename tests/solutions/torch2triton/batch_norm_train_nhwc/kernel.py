"""Training-mode BatchNorm forward (channels last) in Triton: two reads of x, one write of y.

1. Partial sums: each program owns a range of rows (positions n, h, w) and a BLOCK_C slice of
   channels, accumulates sum(x - k) and sum((x - k)^2) in float32 [BLOCK_R, BLOCK_C]
   registers over its rows, and writes one partial pair per channel. k is row 0 of x: a
   shift by one sample of each channel keeps E[(x-k)^2] - E[x-k]^2 free of cancellation
   when a channel's mean is large against its spread.
2. Finalize: per channel, sum the partials, write mean and the biased variance, and fold
   weight and bias into scale = weight / sqrt(var + eps) and shift = bias - mean * scale.
3. Normalize: y = x * scale + shift over [BLOCK_R, BLOCK_C] tiles, stored once in x's dtype.
Channels are the contiguous dimension, so every tile row is one coalesced segment.
"""

import torch
import triton
import triton.language as tl

_TILE = 4096  # elements of x per [BLOCK_R, BLOCK_C] tile
_PROGRAMS = 1024  # target number of programs of the partial-sum pass


@triton.jit
def _bn_partial_kernel(x_ptr, part_ptr, R, C, rows_per_prog,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_r = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < C
    shift = tl.load(x_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)  # row 0
    acc1 = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    row0 = pid_r * rows_per_prog
    row_end = tl.minimum(row0 + rows_per_prog, R)
    for start in range(row0, row_end, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows < row_end)[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * C + cols[None, :], mask=mask,
                    other=0.0).to(tl.float32)
        d = tl.where(mask, x - shift[None, :], 0.0)
        acc1 += d
        acc2 += d * d
    out = pid_r.to(tl.int64) * 2 * C + cols
    tl.store(part_ptr + out, tl.sum(acc1, axis=0), mask=col_ok)
    tl.store(part_ptr + out + C, tl.sum(acc2, axis=0), mask=col_ok)


@triton.jit
def _bn_finalize_kernel(x_ptr, part_ptr, w_ptr, b_ptr, mean_ptr, var_ptr, scale_ptr, shift_ptr,
                        R, C, P, eps, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < C
    s1 = tl.zeros([BLOCK_C], dtype=tl.float32)
    s2 = tl.zeros([BLOCK_C], dtype=tl.float32)
    for p in range(0, P):
        s1 += tl.load(part_ptr + p * 2 * C + cols, mask=col_ok, other=0.0)
        s2 += tl.load(part_ptr + p * 2 * C + C + cols, mask=col_ok, other=0.0)
    k = tl.load(x_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    d_mean = s1 / R
    var = tl.maximum(s2 / R - d_mean * d_mean, 0.0)
    mean = k + d_mean
    scale = tl.load(w_ptr + cols, mask=col_ok, other=0.0) / tl.sqrt(var + eps)
    tl.store(mean_ptr + cols, mean, mask=col_ok)
    tl.store(var_ptr + cols, var, mask=col_ok)
    tl.store(scale_ptr + cols, scale, mask=col_ok)
    tl.store(shift_ptr + cols, tl.load(b_ptr + cols, mask=col_ok, other=0.0) - mean * scale,
             mask=col_ok)


@triton.jit
def _bn_apply_kernel(x_ptr, y_ptr, scale_ptr, shift_ptr, R, C,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < C
    mask = (rows < R)[:, None] & col_ok[None, :]
    offs = rows.to(tl.int64)[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    scale = tl.load(scale_ptr + cols, mask=col_ok, other=0.0)
    shift = tl.load(shift_ptr + cols, mask=col_ok, other=0.0)
    tl.store(y_ptr + offs, (x * scale[None, :] + shift[None, :]).to(y_ptr.dtype.element_ty),
             mask=mask)


def batch_norm_train_nhwc(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    """Return (y, mean, var): batch-normalized x and the per-channel batch statistics.

    x: [N, H, W, C] bfloat16 (float16 in the CPU smoke case), contiguous (channels last);
    weight, bias: [C] float32. mean, var: float32 [C], the mean and biased variance of each
    channel over N * H * W; y = (x - mean) / sqrt(var + eps) * weight + bias, x's dtype.
    """
    assert x.ndim == 4 and x.is_contiguous()
    C = x.shape[-1]
    R = x.numel() // C
    weight, bias = weight.contiguous(), bias.contiguous()
    dev = x.device
    y = torch.empty_like(x)
    mean = torch.empty((C,), device=dev, dtype=torch.float32)
    var = torch.empty((C,), device=dev, dtype=torch.float32)
    if R == 0 or C == 0:
        return y, mean, var
    BLOCK_C = min(128, triton.next_power_of_2(C))
    BLOCK_R = min(_TILE // BLOCK_C, triton.next_power_of_2(R))
    c_blocks = triton.cdiv(C, BLOCK_C)
    r_blocks = triton.cdiv(R, BLOCK_R)
    chunks_per_prog = triton.cdiv(r_blocks, max(1, _PROGRAMS // c_blocks))
    rows_per_prog = chunks_per_prog * BLOCK_R
    P = triton.cdiv(R, rows_per_prog)
    partials = torch.empty((P, 2, C), device=dev, dtype=torch.float32)
    scale = torch.empty((C,), device=dev, dtype=torch.float32)
    shift = torch.empty((C,), device=dev, dtype=torch.float32)
    _bn_partial_kernel[(P, c_blocks)](x, partials, R, C, rows_per_prog,
                                      BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=8)
    _bn_finalize_kernel[(c_blocks,)](x, partials, weight, bias, mean, var, scale, shift,
                                     R, C, P, eps, BLOCK_C=BLOCK_C, num_warps=4)
    _bn_apply_kernel[(r_blocks, c_blocks)](x, y, scale, shift, R, C,
                                           BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=8)
    return y, mean, var
