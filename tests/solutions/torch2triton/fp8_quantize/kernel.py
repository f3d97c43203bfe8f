"""Per-token dynamic fp8 (e4m3) quantisation in Triton.

One kernel instead of the eager chain of casts and element-wise passes: each program owns
one row, reads it once (bf16, 2 B/element), keeps it in registers for the amax and the
scaling, and writes 1 B/element of fp8 plus one float32 scale. Rows longer than MAX_BLOCK
elements fall back to two passes over the row (the second read mostly hits L2)."""

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0
MIN_SCALE = 1e-12
MAX_BLOCK = 16384


@triton.jit
def _quant_row_kernel(x_ptr, q_ptr, s_ptr, N, stride_x, stride_q,
                      BLOCK: tl.constexpr, SINGLE: tl.constexpr,
                      FP8_MAX: tl.constexpr, MIN_SCALE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    q_row = q_ptr + row * stride_q
    offs = tl.arange(0, BLOCK)
    if SINGLE:
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        amax = tl.max(tl.abs(x), axis=0)
        scale = tl.maximum(amax / FP8_MAX, MIN_SCALE)
        y = tl.clamp(x / scale, -FP8_MAX, FP8_MAX)
        tl.store(q_row + offs, y.to(q_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, N, BLOCK):
            mask = start + offs < N
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            acc = tl.maximum(acc, tl.abs(x))
        amax = tl.max(acc, axis=0)
        scale = tl.maximum(amax / FP8_MAX, MIN_SCALE)
        for start in range(0, N, BLOCK):
            mask = start + offs < N
            x = tl.load(x_row + start + offs, mask=mask, other=0.0).to(tl.float32)
            y = tl.clamp(x / scale, -FP8_MAX, FP8_MAX)
            tl.store(q_row + start + offs, y.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


def fp8_quantize(x: torch.Tensor):
    """Quantise each row of x (bf16 [M, N]) to float8_e4m3fn with its own scale.

    Returns (q, scale): q float8_e4m3fn [M, N], scale float32 [M, 1], where
    scale = max(amax(|x[m, :]|) / 448, 1e-12) and q = round_to_e4m3(clamp(x / scale, -448, 448)).
    """
    assert x.ndim == 2 and x.stride(1) == 1
    M, N = x.shape
    q = torch.empty((M, N), device=x.device, dtype=torch.float8_e4m3fn)
    scale = torch.empty((M, 1), device=x.device, dtype=torch.float32)
    if M == 0:
        return q, scale
    single = N <= MAX_BLOCK
    BLOCK = triton.next_power_of_2(N) if single else 4096
    BLOCK = max(BLOCK, 16)
    num_warps = min(16, max(1, BLOCK // 1024)) if single else 8
    _quant_row_kernel[(M,)](
        x, q, scale, N, x.stride(0), q.stride(0),
        BLOCK=BLOCK, SINGLE=single, FP8_MAX=FP8_MAX, MIN_SCALE=MIN_SCALE,
        num_warps=num_warps,
    )
    return q, scale
