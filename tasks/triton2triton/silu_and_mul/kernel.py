"""SiLU-and-mul in Triton.

Two simple kernels: the first computes silu(gate) into a float32 scratch buffer (to keep
the activation in full precision), the second multiplies it by the up projection.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_kernel(x_ptr, act_ptr, N, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    act = g / (1.0 + tl.exp(-g))
    tl.store(act_ptr + row * N + cols, act, mask=mask)


@triton.jit
def _mul_kernel(x_ptr, act_ptr, out_ptr, N, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    act = tl.load(act_ptr + row * N + cols, mask=mask, other=0.0)
    u = tl.load(x_ptr + row * stride_x + N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + cols, (act * u).to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    M, two_n = x.shape
    N = two_n // 2
    act = torch.empty((M, N), device=x.device, dtype=torch.float32)
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    BLOCK = 1024
    grid = (M, triton.cdiv(N, BLOCK))
    _silu_kernel[grid](x, act, N, x.stride(0), BLOCK=BLOCK, num_warps=4)
    _mul_kernel[grid](x, act, out, N, x.stride(0), BLOCK=BLOCK, num_warps=4)
    return out
