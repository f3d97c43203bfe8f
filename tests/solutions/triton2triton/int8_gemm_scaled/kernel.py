"""W8A8 int8 GEMM with per-row and per-channel scales in one Triton kernel.

Large tensor-core tiles (128x256x128 int8, or 128x128x128 when the grid would be short of two
waves), software pipelining over K (num_stages), grouped program ordering so that GROUP_M row
tiles reuse each weight tile from L2, a mask-free main loop (the K tail is peeled) and the
scales applied in the epilogue: the int32 accumulator never leaves registers, and y is
written once, in bf16.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _int8_gemm_scaled_kernel(
    x_ptr, w_ptr, xs_ptr, ws_ptr, y_ptr,
    M, N, K, stride_x, stride_w, stride_y,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Out-of-range rows and columns wrap onto valid ones instead of being masked: their
    # results are never stored, and the main loop stays mask-free.
    offs_xm = offs_m % M
    offs_wn = offs_n % N
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_xm[:, None].to(tl.int64) * stride_x + offs_k[None, :]
    w_ptrs = w_ptr + offs_wn[None, :].to(tl.int64) * stride_w + offs_k[:, None]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    k_full = K // BLOCK_K
    for _ in range(0, k_full):
        a = tl.load(x_ptrs)
        b = tl.load(w_ptrs)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    k_left = K - k_full * BLOCK_K
    if k_left > 0:
        a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0)
        b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)

    mask_m = offs_m < M
    mask_n = offs_n < N
    xs = tl.load(xs_ptr + offs_m, mask=mask_m, other=0.0)
    ws = tl.load(ws_ptr + offs_n, mask=mask_n, other=0.0)
    y = acc.to(tl.float32) * xs[:, None] * ws[None, :]
    tl.store(y_ptr + offs_m[:, None].to(tl.int64) * stride_y + offs_n[None, :],
             y.to(y_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


def _config(M: int, N: int) -> tuple:
    # (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages); 3 stages of 128x256x128
    # int8 tiles use 144 KiB of shared memory.
    if triton.cdiv(M, 128) * triton.cdiv(N, 256) >= 264:  # at least ~2 waves on 132 SMs
        return 128, 256, 128, 8, 8, 3
    return 128, 128, 128, 8, 8, 4


def int8_gemm_scaled(x_q: torch.Tensor, w_q: torch.Tensor, x_scale: torch.Tensor,
                     w_scale: torch.Tensor) -> torch.Tensor:
    x_q = x_q if x_q.stride(1) == 1 else x_q.contiguous()
    w_q = w_q if w_q.stride(1) == 1 else w_q.contiguous()
    x_scale = x_scale.contiguous()
    w_scale = w_scale.contiguous()
    M, K = x_q.shape
    N = w_q.shape[0]
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x_q.device)
    if M == 0 or N == 0:
        return y
    BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages = _config(M, N)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _int8_gemm_scaled_kernel[grid](
        x_q, w_q, x_scale, w_scale, y, M, N, K, x_q.stride(0), w_q.stride(0), y.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        num_warps=num_warps, num_stages=num_stages)
    return y
