"""Transpose of a bf16 matrix [M, N] into a contiguous [N, M] tensor: 2-D tiles, coalesced
both ways.

Each program loads a 64x64 tile of x with rows of 64 consecutive elements (128-byte,
coalesced reads), transposes it on chip (tl.trans: Triton stages it through shared memory)
and stores it as 64 rows of 64 consecutive elements of out (coalesced writes). Every byte of
x is read once and every byte of out written once, in full sectors.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _transpose_tile_kernel(x_ptr, out_ptr, M, N, stride_x, stride_out,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    tile = tl.load(x_ptr + offs_m[:, None].to(tl.int64) * stride_x + offs_n[None, :],
                   mask=mask_m[:, None] & mask_n[None, :])
    tile_t = tl.trans(tile)  # [BLOCK_N, BLOCK_M]
    tl.store(out_ptr + offs_n[:, None].to(tl.int64) * stride_out + offs_m[None, :], tile_t,
             mask=mask_n[:, None] & mask_m[None, :])


def transpose(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    BLOCK_M, BLOCK_N = 64, 64
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _transpose_tile_kernel[grid](x, out, M, N, x.stride(0), out.stride(0),
                                 BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=4)
    return out
