"""MoE output combine in Triton: one pass that gathers each token's k expert rows.

One program per (token, D-block) loads the token's k row ids and weights, then the k
BLOCK_D-wide slices of y (k is a compile-time constant, so the loads are unrolled and all in
flight together), accumulates in float32 and writes the bfloat16 result. y is read exactly
once and the [T, k, D] gather is never materialized.
"""

import torch
import triton
import triton.language as tl

_MAX_BLOCK_D = 1024


@triton.jit
def _moe_combine_kernel(
    y_ptr, perm_ptr, w_ptr, out_ptr, D, stride_y, stride_out, K: tl.constexpr, BLOCK_D: tl.constexpr
):
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for j in tl.static_range(K):
        row = tl.load(perm_ptr + token * K + j)
        w = tl.load(w_ptr + token * K + j)
        x = tl.load(y_ptr + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
        acc += w * x
    tl.store(out_ptr + token * stride_out + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def moe_combine(y: torch.Tensor, inv_perm: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    y = y.contiguous()
    inv_perm = inv_perm.contiguous()
    weights = weights.contiguous()
    T, k = weights.shape
    D = y.shape[1]
    out = torch.empty((T, D), device=y.device, dtype=y.dtype)
    if T == 0 or D == 0:
        return out
    BLOCK_D = min(_MAX_BLOCK_D, triton.next_power_of_2(D))
    num_warps = max(1, min(4, BLOCK_D // 256))  # 8 bf16 (16 bytes) per thread and row
    grid = (T, triton.cdiv(D, BLOCK_D))
    _moe_combine_kernel[grid](
        y, inv_perm, weights, out, D, y.stride(0), out.stride(0), K=k, BLOCK_D=BLOCK_D, num_warps=num_warps
    )
    return out
