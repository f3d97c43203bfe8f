"""RMSNorm and fused add + RMSNorm, each one Triton launch (bf16 in/out, fp32 math).

A program owns ROWS whole rows as one [ROWS, BLOCK_N] register tile: one load, one row
reduction, one store. ROWS * BLOCK_N is about 1024 elements with one warp per 256 of them, so
each thread moves 8 bf16 (16 bytes) per tensor: the hidden size 1024 gets one row and 4 warps
per program, the q/k norm's head_dim 128 gets 8 rows per program. Masks cover any row count
and any width (BLOCK_N is the next power of two).
"""

import torch
import triton
import triton.language as tl

_TILE = 1024  # elements per program (rows * padded width), when the row is narrower


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, M, N, stride_x, stride_y, eps,
                     ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    mask = (rows < M)[:, None] & cmask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, M, N,
                               stride_x, stride_r, stride_y, stride_ro, eps,
                               ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    mask = (rows < M)[:, None] & cmask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    r = tl.load(r_ptr + rows[:, None] * stride_r + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    s = x + r
    tl.store(ro_ptr + rows[:, None] * stride_ro + cols[None, :],
             s.to(ro_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(s * s, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    y = s * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask)


def _rows_2d(t: torch.Tensor) -> torch.Tensor:
    """[..., N] as [M, N] with unit column stride (a view when possible)."""
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _config(m: int, n: int) -> tuple[int, int, int]:
    block_n = triton.next_power_of_2(n)
    rows = max(1, min(_TILE // block_n, triton.next_power_of_2(m)))
    num_warps = max(1, min(16, rows * block_n // 256))
    return block_n, rows, num_warps


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x2 = _rows_2d(x)
    m, n = x2.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m > 0 and n > 0:
        block_n, rows, num_warps = _config(m, n)
        _rms_norm_kernel[(triton.cdiv(m, rows),)](
            x2, weight.contiguous(), y, m, n, x2.stride(0), y.stride(0), eps,
            ROWS=rows, BLOCK_N=block_n, num_warps=num_warps)
    return y.view(x.shape)


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    x2 = _rows_2d(x)
    r2 = _rows_2d(residual)
    m, n = x2.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    residual_out = torch.empty((m, n), dtype=residual.dtype, device=x.device)
    if m > 0 and n > 0:
        block_n, rows, num_warps = _config(m, n)
        _fused_add_rms_norm_kernel[(triton.cdiv(m, rows),)](
            x2, r2, weight.contiguous(), y, residual_out, m, n,
            x2.stride(0), r2.stride(0), y.stride(0), residual_out.stride(0), eps,
            ROWS=rows, BLOCK_N=block_n, num_warps=num_warps)
    return y.view(x.shape), residual_out.view(x.shape)
