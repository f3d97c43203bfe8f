"""Skinny GEMM y = x @ weight^T (a few rows of x, a large weight) in Triton.

A standard tiled GEMM: one program per 64 x 128 output tile, walking all of K in 32-wide
steps with a float32 accumulator. The products use tl.dot on float32 operands: bf16 values
are exact in tf32, so each product is exact and only the float32 accumulation rounds (this
also keeps Triton's CPU interpreter, whose bf16 tl.dot is broken, on the same code path).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        kk = k + rk
        a = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :],
                    mask=(rm < M)[:, None] & (kk < K)[None, :], other=0.0)
        b = tl.load(w_ptr + rn[None, :] * stride_wn + kk[:, None],
                    mask=(kk < K)[:, None] & (rn < N)[None, :], other=0.0)
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])


def skinny_gemm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    weight = weight.contiguous()
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _gemm_kernel[grid](x, weight, y, M, N, K, x.stride(0), weight.stride(0), y.stride(0),
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4,
                       num_stages=3)
    return y
