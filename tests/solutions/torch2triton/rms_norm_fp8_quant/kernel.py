"""Fused RMSNorm + per-token dynamic fp8 (e4m3) quantisation in Triton.

One kernel instead of the eager chain of float32 copies and element-wise passes: each
program owns one row, reads it once (bf16, 2 B/element) into registers, reduces the sum of
squares, normalises and weights it, reduces the amax of the result, and writes 1 B/element
of fp8 (hardware round-to-nearest conversion) plus one float32 scale. Rows longer than
MAX_BLOCK elements fall back to three passes over the row (sum of squares, amax, quantise;
the second and third reads mostly hit L2).
"""

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0
MIN_SCALE = 1e-12
MAX_BLOCK = 16384
LOOP_BLOCK = 4096


@triton.jit
def _rms_quant_row_kernel(x_ptr, w_ptr, q_ptr, s_ptr, N, stride_x, stride_q, eps,
                          BLOCK: tl.constexpr, SINGLE: tl.constexpr,
                          FP8_MAX: tl.constexpr, MIN_SCALE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    q_row = q_ptr + row * stride_q
    offs = tl.arange(0, BLOCK)
    if SINGLE:
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        y = x * rstd * w
        scale = tl.maximum(tl.max(tl.abs(y), axis=0) / FP8_MAX, MIN_SCALE)
        q = tl.clamp(y / scale, -FP8_MAX, FP8_MAX)
        tl.store(q_row + offs, q.to(q_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, N, BLOCK):
            mask = start + offs < N
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        amax = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, N, BLOCK):
            mask = start + offs < N
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.abs(x * rstd * w))
        scale = tl.maximum(tl.max(amax, axis=0) / FP8_MAX, MIN_SCALE)
        for start in range(0, N, BLOCK):
            mask = start + offs < N
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            q = tl.clamp(x * rstd * w / scale, -FP8_MAX, FP8_MAX)
            tl.store(q_row + start + offs, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


def rms_norm_fp8_quant(x: torch.Tensor, weight: torch.Tensor, eps: float):
    """RMSNorm each row of x (bf16 [M, N], weight bf16 [N]), then quantise it to fp8 e4m3.

    Returns (q, scale): q float8_e4m3fn [M, N], scale float32 [M, 1], where, in float32,
    y = x / sqrt(mean(x**2) + eps) * weight, scale = max(amax(|y|) / 448, 1e-12) and
    q = round_to_e4m3(clamp(y / scale, -448, 448)).
    """
    assert x.ndim == 2 and x.stride(1) == 1
    weight = weight.contiguous()
    M, N = x.shape
    q = torch.empty((M, N), device=x.device, dtype=torch.float8_e4m3fn)
    scale = torch.empty((M, 1), device=x.device, dtype=torch.float32)
    if M == 0 or N == 0:
        return q, scale
    single = N <= MAX_BLOCK
    BLOCK = max(triton.next_power_of_2(N), 16) if single else LOOP_BLOCK
    num_warps = min(16, max(1, BLOCK // 1024)) if single else 8
    _rms_quant_row_kernel[(M,)](
        x, weight, q, scale, N, x.stride(0), q.stride(0), eps,
        BLOCK=BLOCK, SINGLE=single, FP8_MAX=FP8_MAX, MIN_SCALE=MIN_SCALE,
        num_warps=num_warps,
    )
    return q, scale
