"""W8A8 int8 GEMM with per-row and per-channel scales, in Triton.

A first kernel computes acc = x_q @ w_q^T in int32 with 32x32x32 tiles into an int32
temporary [M, N]; a second kernel reads it back, applies x_scale[i] * w_scale[j] in float32
and writes the bf16 output.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _int8_matmul_kernel(x_ptr, w_ptr, acc_ptr, M, N, K, stride_x, stride_w, stride_acc,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(x_ptr + offs_m[:, None].to(tl.int64) * stride_x + ks[None, :],
                    mask=mask_m[:, None] & (ks[None, :] < K), other=0)
        b = tl.load(w_ptr + offs_n[None, :].to(tl.int64) * stride_w + ks[:, None],
                    mask=mask_n[None, :] & (ks[:, None] < K), other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    tl.store(acc_ptr + offs_m[:, None].to(tl.int64) * stride_acc + offs_n[None, :], acc,
             mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def _scale_kernel(acc_ptr, xs_ptr, ws_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    rows = offs // N
    cols = offs % N
    acc = tl.load(acc_ptr + offs, mask=mask, other=0).to(tl.float32)
    xs = tl.load(xs_ptr + rows, mask=mask, other=0.0)
    ws = tl.load(ws_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + offs, (acc * xs * ws).to(y_ptr.dtype.element_ty), mask=mask)


def int8_gemm_scaled(x_q: torch.Tensor, w_q: torch.Tensor, x_scale: torch.Tensor,
                     w_scale: torch.Tensor) -> torch.Tensor:
    x_q = x_q.contiguous()
    w_q = w_q.contiguous()
    x_scale = x_scale.contiguous()
    w_scale = w_scale.contiguous()
    M, K = x_q.shape
    N = w_q.shape[0]
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x_q.device)
    if M == 0 or N == 0:
        return y
    acc = torch.empty((M, N), dtype=torch.int32, device=x_q.device)
    BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _int8_matmul_kernel[grid](x_q, w_q, acc, M, N, K, x_q.stride(0), w_q.stride(0),
                              acc.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                              BLOCK_K=BLOCK_K, num_warps=4, num_stages=1)
    BLOCK = 1024
    _scale_kernel[(triton.cdiv(M * N, BLOCK),)](acc, x_scale, w_scale, y, M, N, BLOCK=BLOCK,
                                                num_warps=4)
    return y
