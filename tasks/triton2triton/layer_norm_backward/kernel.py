"""LayerNorm backward (weight and bias gradients too) in Triton.

Two kernels: the first computes dx with one program per row (a loop over the row for the two
row sums, a second loop writing dx); the second computes dweight and dbias with one program per
block of columns, walking all M rows of x and dy again.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _ln_bwd_dx_kernel(x_ptr, w_ptr, dy_ptr, mean_ptr, rstd_ptr, dx_ptr, N, stride,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    dy_row = dy_ptr + row * stride
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    sum_xhat_wdy = 0.0
    sum_wdy = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        sum_xhat_wdy += tl.sum(xhat * wdy, axis=0)
        sum_wdy += tl.sum(wdy, axis=0)
    c1 = sum_xhat_wdy / N
    c2 = sum_wdy / N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = (x - mean) * rstd
        dx = (w * dy - xhat * c1 - c2) * rstd
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ln_bwd_dwdb_kernel(x_ptr, dy_ptr, mean_ptr, rstd_ptr, dw_ptr, db_ptr, M, N, stride,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        offs = rows[:, None] * stride + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        xhat = (x - mean[:, None]) * rstd[:, None]
        dw += dy * xhat
        db += dy
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0), mask=col_mask)
    tl.store(db_ptr + cols, tl.sum(db, axis=0), mask=col_mask)


def layer_norm_backward(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor,
                        mean: torch.Tensor, rstd: torch.Tensor):
    x = x.contiguous()
    dy = dy.contiguous()
    M, N = x.shape
    dx = torch.empty_like(x)
    dweight = torch.empty((N,), device=x.device, dtype=torch.float32)
    dbias = torch.empty((N,), device=x.device, dtype=torch.float32)
    BLOCK = 1024
    _ln_bwd_dx_kernel[(M,)](x, weight, dy, mean, rstd, dx, N, x.stride(0), BLOCK=BLOCK,
                            num_warps=4)
    BLOCK_M, BLOCK_N = 32, 128
    _ln_bwd_dwdb_kernel[(triton.cdiv(N, BLOCK_N),)](x, dy, mean, rstd, dweight, dbias, M, N,
                                                    x.stride(0), BLOCK_M=BLOCK_M,
                                                    BLOCK_N=BLOCK_N, num_warps=4)
    return dx, dweight, dbias
