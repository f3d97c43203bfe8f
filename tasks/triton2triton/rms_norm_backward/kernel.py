"""RMSNorm backward (weight gradient too) in Triton.

Two kernels: the first computes dx with one program per row (a loop over the row for the row
sum, a second loop writing dx); the second computes dweight with one program per block of
columns, walking all M rows of x and dy again.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_bwd_dx_kernel(x_ptr, w_ptr, dy_ptr, rstd_ptr, dx_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    dy_row = dy_ptr + row * stride
    rstd = tl.load(rstd_ptr + row)
    sum_xhat_wdy = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        sum_xhat_wdy += tl.sum(x * rstd * w * dy, axis=0)
    c1 = sum_xhat_wdy / N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        dx = (w * dy - x * rstd * c1) * rstd
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_bwd_dw_kernel(x_ptr, dy_ptr, rstd_ptr, dw_ptr, M, N, stride, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offs = rows[:, None] * stride + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        dw += dy * x * rstd[:, None]
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0), mask=col_mask)


def rms_norm_backward(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor,
                      rstd: torch.Tensor):
    x = x.contiguous()
    dy = dy.contiguous()
    M, N = x.shape
    dx = torch.empty_like(x)
    dweight = torch.empty((N,), device=x.device, dtype=torch.float32)
    BLOCK = 1024
    _rms_bwd_dx_kernel[(M,)](x, weight, dy, rstd, dx, N, x.stride(0), BLOCK=BLOCK, num_warps=4)
    BLOCK_M, BLOCK_N = 32, 128
    _rms_bwd_dw_kernel[(triton.cdiv(N, BLOCK_N),)](x, dy, rstd, dweight, M, N, x.stride(0),
                                                   BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                                   num_warps=4)
    return dx, dweight
