"""GELU (tanh approximation) in Triton: wide blocks, 16-byte vector accesses, one exp2.

gelu(x) = 0.5 * x * (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
with u = sqrt(2/pi) * (x + 0.044715 x^3), evaluated as one exp2 and one division.

The full blocks run without a mask (so loads and stores stay 16-byte vectors even when the
element count is odd); the ragged tail, if any, is a second, masked launch.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 4096


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, MASKED: tl.constexpr):
    # -2 * sqrt(2/pi) * log2(e), and that times 0.044715
    C0: tl.constexpr = -2.3022081981
    C1: tl.constexpr = -0.1029432396
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if MASKED:
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    else:
        x = tl.load(x_ptr + offs).to(tl.float32)
    y = (x / (1.0 + tl.exp2(x * (C0 + C1 * (x * x))))).to(y_ptr.dtype.element_ty)
    if MASKED:
        tl.store(y_ptr + offs, y, mask=mask)
    else:
        tl.store(y_ptr + offs, y)


def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    # 4096 elements per program, 8 warps: 16 bf16 (32 bytes) per thread as 16-byte vectors.
    n_full = (n // _BLOCK) * _BLOCK
    if n_full:
        _gelu_kernel[(n_full // _BLOCK,)](x, y, n_full, BLOCK_SIZE=_BLOCK, MASKED=False,
                                         num_warps=8)
    if n > n_full:
        xt, yt = x.view(-1)[n_full:], y.view(-1)[n_full:]
        _gelu_kernel[(1,)](xt, yt, n - n_full, BLOCK_SIZE=_BLOCK, MASKED=True, num_warps=8)
    return y
