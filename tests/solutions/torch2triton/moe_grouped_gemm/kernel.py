"""MoE grouped GEMM in Triton: one launch for every (expert, row tile, column tile).

The grid has an upper bound of row tiles, cdiv(T, BLOCK_M) + E (each expert wastes at
most one partial tile), times the column tiles, known from the shapes alone: no host sync.
Each program loads the E + 1 offsets as one vector, counts the row tiles of every expert,
takes an inclusive cumsum and finds its expert with one comparison-sum; programs past the
last tile exit at once. Row indices are clamped to the expert's last row so the main loop
needs no masks (only the store is masked), and the K tail is peeled. Grouped ordering keeps
the tiles of one expert's weights and one x row band hot in L2.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_gemm_kernel(
    x_ptr, off_ptr, w_ptr, out_ptr,
    N, K, E, num_pid_m,
    ldx_v, ldw_v, ldo_v,  # leading dimensions divided by VEC
    E_PAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, VEC: tl.constexpr,
):
    ldx = ldx_v * VEC
    ldw = ldw_v * VEC
    ldo = ldo_v * VEC
    # Grouped ordering over (virtual row tile, column tile).
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Which expert owns row tile pid_m: tiles are numbered expert by expert.
    e_idx = tl.arange(0, E_PAD)
    e_mask = e_idx < E
    starts = tl.load(off_ptr + e_idx, mask=e_mask, other=0)
    ends = tl.load(off_ptr + e_idx + 1, mask=e_mask, other=0)
    tiles = (ends - starts + BLOCK_M - 1) // BLOCK_M
    tiles_incl = tl.cumsum(tiles, axis=0)
    expert = tl.sum((tiles_incl <= pid_m).to(tl.int32), axis=0)
    if expert < E:
        sel = e_idx == expert
        row_start = tl.sum(tl.where(sel, starts, 0), axis=0)
        row_end = tl.sum(tl.where(sel, ends, 0), axis=0)
        first_tile = tl.sum(tl.where(sel, tiles_incl - tiles, 0), axis=0)
        rows = row_start + (pid_m - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)
        rows_ld = tl.minimum(rows, row_end - 1)  # in the expert's rows; masked at the store
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_wn = offs_n % N
        offs_k = tl.arange(0, BLOCK_K)
        x_ptrs = x_ptr + rows_ld[:, None].to(tl.int64) * ldx + offs_k[None, :]
        w_base = w_ptr + expert.to(tl.int64) * N * ldw
        w_ptrs = w_base + offs_wn[None, :].to(tl.int64) * ldw + offs_k[:, None]  # K-major

        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        k_full = K // BLOCK_K
        for _ in range(0, k_full):
            acc = tl.dot(tl.load(x_ptrs), tl.load(w_ptrs), acc)
            x_ptrs += BLOCK_K
            w_ptrs += BLOCK_K
        k_left = K - k_full * BLOCK_K
        if k_left > 0:
            a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)

        mask = (rows[:, None] < row_end) & (offs_n[None, :] < N)
        tl.store(out_ptr + rows[:, None].to(tl.int64) * ldo + offs_n[None, :],
                 acc.to(out_ptr.dtype.element_ty), mask=mask)


def _vec(*lds: int) -> int:
    for v in (8, 4, 2):
        if all(ld % v == 0 for ld in lds):
            return v
    return 1


def moe_grouped_gemm(x: torch.Tensor, expert_offsets: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Return out [T, N] in x's dtype with out[s:t] = x[s:t] @ w[e]^T for every expert e."""
    x = x.contiguous()
    w = w.contiguous()
    expert_offsets = expert_offsets.contiguous()
    T, K = x.shape
    E, N, _ = w.shape
    out = torch.empty((T, N), device=x.device, dtype=x.dtype)
    if T == 0 or N == 0:
        return out
    # Row tiles sized to the average expert load: small experts waste less of a tile.
    rows_per_expert = T // E
    if rows_per_expert >= 512:
        block_m, num_warps = 128, 8
    elif rows_per_expert >= 64:
        block_m, num_warps = 64, 4
    else:
        block_m, num_warps = 32, 4
    block_n, block_k = 128, 64
    num_pid_m = triton.cdiv(T, block_m) + E  # upper bound on the experts' row tiles
    vec = _vec(K, N)
    grid = (num_pid_m * triton.cdiv(N, block_n),)
    _grouped_gemm_kernel[grid](
        x, expert_offsets, w, out, N, K, E, num_pid_m, K // vec, K // vec, N // vec,
        E_PAD=triton.next_power_of_2(E), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        GROUP_M=8, VEC=vec, num_warps=num_warps, num_stages=4,
    )
    return out
