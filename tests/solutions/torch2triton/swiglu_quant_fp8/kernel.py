"""SwiGLU + per-token dynamic fp8 (e4m3) quantisation in Triton, one kernel.

The eager chain (float32 copy, silu, multiply, abs, amax, divide, clamp, cast) becomes one
pass: each program owns one token, reads its gate and up halves once (bf16), computes
y = silu(a) * b in float32 registers, reduces the amax, and writes the fp8 values (hardware
round-to-nearest conversion) and one float32 scale. y never touches memory. Rows with
H > MAX_BLOCK take two passes over the row (amax, then quantise, recomputing y); the second
read of the row mostly hits L2.
"""

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0
MIN_SCALE = 1e-12
MAX_BLOCK = 8192
LOOP_BLOCK = 4096


@triton.jit
def _swiglu(a_row, b_row, offs, mask):
    a = tl.load(a_row + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_row + offs, mask=mask, other=0.0).to(tl.float32)
    return a / (1.0 + tl.exp(-a)) * b


@triton.jit
def _swiglu_quant_kernel(x_ptr, q_ptr, s_ptr, H, stride_x, stride_q,
                         BLOCK: tl.constexpr, SINGLE: tl.constexpr,
                         FP8_MAX: tl.constexpr, MIN_SCALE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    a_row = x_ptr + row * stride_x
    b_row = a_row + H
    q_row = q_ptr + row * stride_q
    offs = tl.arange(0, BLOCK)
    if SINGLE:
        mask = offs < H
        y = _swiglu(a_row, b_row, offs, mask)
        amax = tl.max(tl.abs(y), axis=0)
        scale = tl.maximum(amax / FP8_MAX, MIN_SCALE)
        q = tl.clamp(y / scale, -FP8_MAX, FP8_MAX)
        tl.store(q_row + offs, q.to(q_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, H, BLOCK):
            mask = start + offs < H
            acc = tl.maximum(acc, tl.abs(_swiglu(a_row + start, b_row + start, offs, mask)))
        amax = tl.max(acc, axis=0)
        scale = tl.maximum(amax / FP8_MAX, MIN_SCALE)
        for start in range(0, H, BLOCK):
            mask = start + offs < H
            y = _swiglu(a_row + start, b_row + start, offs, mask)
            q = tl.clamp(y / scale, -FP8_MAX, FP8_MAX)
            tl.store(q_row + start + offs, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


def swiglu_quant_fp8(x: torch.Tensor):
    """Quantise y = silu(a) * b row by row, where x = [a | b] is bf16 [T, 2H].

    Returns (q, scale): q float8_e4m3fn [T, H], scale float32 [T], where
    scale = max(amax(|y[t, :]|) / 448, 1e-12) and q = round_to_e4m3(clamp(y / scale, -448, 448)).
    """
    assert x.ndim == 2 and x.stride(1) == 1 and x.shape[1] % 2 == 0
    T, H = x.shape[0], x.shape[1] // 2
    q = torch.empty((T, H), device=x.device, dtype=torch.float8_e4m3fn)
    scale = torch.empty((T,), device=x.device, dtype=torch.float32)
    if T == 0:
        return q, scale
    single = H <= MAX_BLOCK
    BLOCK = max(16, triton.next_power_of_2(H)) if single else LOOP_BLOCK
    num_warps = min(16, max(1, BLOCK // 512)) if single else 8
    _swiglu_quant_kernel[(T,)](
        x, q, scale, H, x.stride(0), q.stride(0),
        BLOCK=BLOCK, SINGLE=single, FP8_MAX=FP8_MAX, MIN_SCALE=MIN_SCALE,
        num_warps=num_warps,
    )
    return q, scale
