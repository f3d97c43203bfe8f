"""LayerNorm (with weight and bias) in Triton.

Two kernels: the first computes each row's mean and reciprocal standard deviation into
float32 buffers (two loops over the row), the second normalizes x elementwise.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _ln_stats_kernel(x_ptr, mean_ptr, rstd_ptr, N, stride_x, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    total = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        total += tl.sum(x, axis=0)
    mean = total / N
    sq = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        sq += tl.sum(d * d, axis=0)
    rstd = 1.0 / tl.sqrt(sq / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _ln_apply_kernel(x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, y_ptr, N, stride_x, stride_y,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               eps: float) -> torch.Tensor:
    x = x.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty((M,), device=x.device, dtype=torch.float32)
    rstd = torch.empty((M,), device=x.device, dtype=torch.float32)
    BLOCK = 1024
    _ln_stats_kernel[(M,)](x, mean, rstd, N, x.stride(0), eps, BLOCK=BLOCK, num_warps=4)
    _ln_apply_kernel[(M, triton.cdiv(N, BLOCK))](x, weight, bias, mean, rstd, y, N,
                                                 x.stride(0), y.stride(0), BLOCK=BLOCK,
                                                 num_warps=4)
    return y
