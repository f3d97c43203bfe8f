"""Fused GEMM + bias + GELU in Triton: out = gelu(A @ B + bias).

One pass: the bias add and the erf GELU run on the fp32 accumulator in registers, so the
[M, N] result is written once instead of being written and re-read by two more kernels.
The GEMM itself uses Hopper-friendly tiles, software pipelining, grouped program ordering,
a mask-free main loop (K tail peeled) and leading dimensions passed as multiples of VEC so
loads stay 16-byte vectors for any K or N that is a multiple of 8."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_bias_gelu_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr,
    M, N, K,
    lda_v, ldb_v, ldc_v,  # leading dimensions divided by VEC
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, VEC: tl.constexpr,
):
    lda = lda_v * VEC
    ldb = ldb_v * VEC
    ldc = ldc_v * VEC
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
    offs_am = offs_m % M
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_n % N, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None].to(tl.int64) * lda + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * ldb + offs_bn[None, :]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_full = K // BLOCK_K
    for _ in range(0, k_full):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * ldb
    k_left = K - k_full * BLOCK_K
    if k_left > 0:
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)

    # Epilogue in fp32: bias, then exact GELU.
    bias = tl.load(bias_ptr + offs_bn).to(tl.float32)
    x = acc + bias[None, :]
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))

    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * ldc + offs_n[None, :]
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, y.to(c_ptr.dtype.element_ty), mask=c_mask)


def _config(M: int, N: int) -> tuple:
    # (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)
    if triton.cdiv(M, 128) * triton.cdiv(N, 256) >= 264:  # at least ~2 waves on 132 SMs
        return 128, 256, 64, 8, 8, 4
    return 128, 128, 64, 8, 8, 4


def _vec(*lds: int) -> int:
    for v in (8, 4, 2):
        if all(ld % v == 0 for ld in lds):
            return v
    return 1


def gemm_bias_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Return gelu(a @ b + bias) (exact erf GELU) as a new [M, N] tensor in a's dtype.

    a: [M, K], b: [K, N], bias: [N]; all bf16 or all fp16, row-major and contiguous.
    """
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]
    a = a if a.stride(1) == 1 else a.contiguous()
    b = b if b.stride(1) == 1 else b.contiguous()
    bias = bias.contiguous()
    M, K = a.shape
    _, N = b.shape
    assert bias.shape == (N,)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages = _config(M, N)
    vec = _vec(a.stride(0), b.stride(0), c.stride(0))
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _gemm_bias_gelu_kernel[grid](
        a, b, bias, c, M, N, K,
        a.stride(0) // vec, b.stride(0) // vec, c.stride(0) // vec,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, VEC=vec,
        num_warps=num_warps, num_stages=num_stages,
    )
    return c
