"""Row-wise L2 normalization in Triton: x read from HBM once, y written once.

When D fills at least 3/4 of its power-of-two padding (and fits in _MAX_SINGLE_BLOCK), a
program holds ROWS whole rows in registers as a [ROWS, BLOCK] tile (several rows per program
when D is small, so each program moves about 8 KB): one load, one row-wise sum of squares in
float32, one store. Otherwise (e.g. D = 1500, padded to 2048) one program per row walks it
in chunks with a vector accumulator, and the second pass re-reads the row from L2. The
scale is 1 / max(sqrt(sum), 1e-12), so an all-zero row gives zeros.
"""

import torch
import triton
import triton.language as tl

_MAX_SINGLE_BLOCK = 16384
_TILE = 4096  # elements per program on the whole-row path
_CHUNK = 1024


@triton.jit
def _l2norm_rows_kernel(x_ptr, y_ptr, N, D, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < N) & (cols[None, :] < D)
    offs = rows[:, None] * D + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    norm = tl.sqrt(tl.sum(x * x, axis=1))
    inv = 1.0 / tl.maximum(norm, 1e-12)
    tl.store(y_ptr + offs, (x * inv[:, None]).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _l2norm_looped_kernel(x_ptr, y_ptr, D, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * D
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, D, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + base + cols, mask=cols < D, other=0.0).to(tl.float32)
        acc += x * x
    inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), 1e-12)
    for start in range(0, D, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = cols < D
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + cols, (x * inv).to(y_ptr.dtype.element_ty), mask=mask)


def l2_normalize_rows(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    N, D = x.shape
    y = torch.empty_like(x)
    if N == 0 or D == 0:
        return y
    BLOCK = triton.next_power_of_2(D)
    if BLOCK <= _MAX_SINGLE_BLOCK and 4 * D >= 3 * BLOCK:
        rows = max(1, _TILE // BLOCK)
        num_warps = min(16, max(4, rows * BLOCK // 512))  # 8-16 elements per thread
        _l2norm_rows_kernel[(triton.cdiv(N, rows),)](x, y, N, D, ROWS=rows, BLOCK=BLOCK,
                                                      num_warps=num_warps)
    else:
        chunk = min(_CHUNK, BLOCK)
        _l2norm_looped_kernel[(N,)](x, y, D, CHUNK=chunk, num_warps=max(1, chunk // 256))
    return y
