"""Weight-only int4 GEMM in Triton: the int4 weights are dequantised in registers.

Each program owns BLOCK_N output columns (all M <= 64 rows of x) and a range of K groups.
Per group of G = 128 it loads the [G, BLOCK_N] tile of packed bytes (half a byte per
weight; each byte is addressed by both of its nibbles, which the same load transaction
serves), sign-extends the nibbles to exact small integers in x's dtype, multiplies them
by the x tile on the tensor cores (fp32), and scales that partial product by the group's
per-column scale: dequantisation is exact and costs one multiply per output per group.
When there are too few column tiles to fill the GPU (small N, long K), K is split across
programs that write fp32 partials, summed by a small second kernel.
"""

import torch
import triton
import triton.language as tl

_NUM_SMS = 132


@triton.jit
def _int4_gemm_kernel(
    x_ptr, w_ptr, s_ptr, out_ptr,
    M, N, K, groups_per_split,
    G: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_groups = K // G
    g_begin = pid_k * groups_per_split
    g_end = tl.minimum(g_begin + groups_per_split, num_groups)

    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_wn = (offs_n % N).to(tl.int64)  # wrapped: loads in bounds, masked at the store
    offs_k = tl.arange(0, G)
    m_mask = offs_m[:, None] < M
    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
    # [G, BLOCK_N] tile of W^T: byte k // 2 of row n, nibble k % 2.
    w_ptrs = w_ptr + offs_wn[None, :] * (K // 2) + (offs_k // 2)[:, None]
    shift = ((offs_k % 2) * 4)[:, None]
    s_ptrs = s_ptr + offs_wn * num_groups

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for grp in range(g_begin, g_end):
        k0 = grp * G
        a = tl.load(x_ptrs + k0, mask=m_mask, other=0.0)
        p = tl.load(w_ptrs + k0 // 2).to(tl.int32)
        q = (((p >> shift) & 0xF) ^ 8) - 8  # sign-extended int4 in [-8, 7]
        part = tl.dot(a, q.to(a.dtype))  # exact integers times x, fp32 accumulation
        s = tl.load(s_ptrs + grp).to(tl.float32)
        acc += part * s[None, :]

    out = out_ptr + pid_k.to(tl.int64) * M * N
    mask = m_mask & (offs_n[None, :] < N)
    tl.store(out + offs_m[:, None] * N + offs_n[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _sum_splits_kernel(part_ptr, y_ptr, total, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(SPLIT_K):
        acc += tl.load(part_ptr + i * total + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, w_packed, scales, block_n: int, split_k: int) -> torch.Tensor:
    M, K = x.shape
    N = w_packed.shape[0]
    G = K // scales.shape[1]
    num_groups = K // G
    groups_per_split = triton.cdiv(num_groups, split_k)
    split_k = triton.cdiv(num_groups, groups_per_split)
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    block_m = max(16, triton.next_power_of_2(M))
    out = y if split_k == 1 else torch.empty((split_k, M, N), device=x.device,
                                             dtype=torch.float32)
    grid = (triton.cdiv(N, block_n), split_k)
    _int4_gemm_kernel[grid](x, w_packed, scales, out, M, N, K, groups_per_split,
                            G=G, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4, num_stages=4)
    if split_k > 1:
        total = M * N
        _sum_splits_kernel[(triton.cdiv(total, 1024),)](out, y, total, SPLIT_K=split_k,
                                                        BLOCK=1024, num_warps=4)
    return y


def int4_weight_gemm(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Return x @ dequant(W)^T as a new [M, N] tensor in x's dtype."""
    x = x.contiguous()
    w_packed = w_packed.contiguous()
    scales = scales.contiguous()
    M, K = x.shape
    N = w_packed.shape[0]
    if M == 0 or N == 0:
        return torch.empty((M, N), device=x.device, dtype=x.dtype)
    # Narrow column tiles for decode (the x tile is tiny); wider ones as M grows, so that
    # re-reading x from L2 for every column tile stays below the weight traffic.
    block_n = 64 if M <= 16 else 128
    n_tiles = triton.cdiv(N, block_n)
    num_groups = K // (K // scales.shape[1])
    # Split K only when the column tiles alone do not make ~2 waves.
    split_k = max(1, min(num_groups, 16, triton.cdiv(2 * _NUM_SMS, n_tiles)))
    return _launch(x, w_packed, scales, block_n, split_k)
