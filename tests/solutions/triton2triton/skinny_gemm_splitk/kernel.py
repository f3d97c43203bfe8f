"""Skinny GEMM y = x @ weight^T in Triton: split-K over enough programs to fill the GPU.

With M <= 64 there are only cdiv(N, BLOCK_N) output tiles, far fewer than needed to keep 132
SMs streaming the weight. The first kernel therefore splits K as well: program (n tile,
k split, m tile) multiplies a BLOCK_M x k_per_split slice of x (BLOCK_M as small as M allows,
16 at least, so almost no tensor-core work is wasted) by the matching [BLOCK_N, k_per_split]
slice of the weight and writes a float32 partial tile. The number of splits is chosen so that
there are about 4 programs per SM. A second kernel sums the splits' partials (a few MB, in
L2) and rounds once to bf16. The weight is read from HBM exactly once, in 64 x 128 tiles,
3 stages deep. The products use tl.dot on float32 operands: bf16 values are exact in tf32,
so every product is exact (this also keeps Triton's CPU interpreter, whose bf16 tl.dot is
broken, on the same code path).
"""

import torch
import triton
import triton.language as tl

_BLOCK_N = 64
_BLOCK_K = 128
_PROGRAMS_PER_SM = 4


@triton.jit
def _splitk_kernel(x_ptr, w_ptr, part_ptr, M, N, K, stride_xm, stride_wn, k_per_split,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_mask = rm < M
    n_mask = rn < N
    k_start = pid_k * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        kk = k + rk
        k_mask = kk < k_end
        a = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :],
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(w_ptr + rn[None, :].to(tl.int64) * stride_wn + kk[:, None],
                    mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
    part = part_ptr + pid_k * M * N
    tl.store(part + rm[:, None] * N + rn[None, :], acc, mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def _sum_splits_kernel(part_ptr, y_ptr, MN, splits, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, splits):
        acc += tl.load(part_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2


def skinny_gemm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    weight = weight.contiguous()
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0:
        return y
    if K == 0:
        return y.zero_()
    block_m = min(64, max(16, triton.next_power_of_2(M)))
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, _BLOCK_N)
    k_blocks = triton.cdiv(K, _BLOCK_K)
    want = max(1, min(k_blocks, triton.cdiv(_PROGRAMS_PER_SM * _num_sms(x.device), tiles)))
    k_per_split = triton.cdiv(k_blocks, want) * _BLOCK_K
    splits = triton.cdiv(K, k_per_split)
    part = torch.empty((splits, M, N), device=x.device, dtype=torch.float32)
    grid = (triton.cdiv(N, _BLOCK_N), splits, triton.cdiv(M, block_m))
    _splitk_kernel[grid](x, weight, part, M, N, K, x.stride(0), weight.stride(0), k_per_split,
                         BLOCK_M=block_m, BLOCK_N=_BLOCK_N, BLOCK_K=_BLOCK_K, num_warps=4,
                         num_stages=3)
    block = 1024
    _sum_splits_kernel[(triton.cdiv(M * N, block),)](part, y, M * N, splits, BLOCK=block,
                                                     num_warps=4)
    return y
