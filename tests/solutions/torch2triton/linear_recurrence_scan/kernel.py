"""Gated linear recurrence in Triton: one pass over a and x, a chunked parallel scan over time.

h_t = a_t * h_{t-1} + x_t composes as affine maps: (a1, x1) then (a2, x2) is
(a1 * a2, a2 * x1 + x2), an associative operation. Each program owns one batch row and a
BLOCK_D-wide slice of channels (contiguous, so every load and store is coalesced) and walks
time in BLOCK_T-step chunks: it loads the whole [BLOCK_T, BLOCK_D] tile of a and x at once
(many loads in flight instead of one dependent load per step), scans it along time with
tl.associative_scan in float32, applies the carried state h of the previous chunks
(h_t = A_t * h + X_t), stores the tile as bf16 and carries its last row. a and x are read
once and h written once; nothing else touches memory.
"""

import torch
import triton
import triton.language as tl

_BLOCK_T = 32


@triton.jit
def _affine_combine(a1, x1, a2, x2):
    # apply (a1, x1) first, then (a2, x2)
    return a1 * a2, a2 * x1 + x2


@triton.jit
def _recurrence_kernel(a_ptr, x_ptr, h_ptr, T, D, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_d = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < D
    steps = tl.arange(0, BLOCK_T)
    base = b * T * D
    h = tl.zeros([BLOCK_D], dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        rows = t0 + steps
        mask = (rows < T)[:, None] & col_ok[None, :]
        offs = base + rows.to(tl.int64)[:, None] * D + cols[None, :]
        # padding steps are the identity map (a = 1, x = 0): the last row carries the state
        a = tl.load(a_ptr + offs, mask=mask, other=1.0).to(tl.float32)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        acc_a, acc_x = tl.associative_scan((a, x), axis=0, combine_fn=_affine_combine)
        hs = acc_a * h[None, :] + acc_x
        tl.store(h_ptr + offs, hs.to(h_ptr.dtype.element_ty), mask=mask)
        h = tl.sum(tl.where(steps[:, None] == BLOCK_T - 1, hs, 0.0), axis=0)


def linear_recurrence_scan(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Return h with h[b, t, :] = a[b, t, :] * h[b, t - 1, :] + x[b, t, :] and h[b, -1, :] = 0.

    a, x: [B, T, D] bfloat16 (float16 in the CPU smoke case), contiguous; the recurrence
    runs in float32 and h is returned as a new tensor [B, T, D] of x's dtype.
    """
    assert a.shape == x.shape and x.ndim == 3
    a, x = a.contiguous(), x.contiguous()
    B, T, D = x.shape
    h = torch.empty_like(x)
    if B == 0 or T == 0 or D == 0:
        return h
    # 64 channels (128-byte rows) per program, or 32 when that leaves too few programs
    block_d = 64 if B * triton.cdiv(D, 64) >= 264 else 32
    block_d = min(block_d, max(16, triton.next_power_of_2(D)))
    grid = (triton.cdiv(D, block_d), B)
    _recurrence_kernel[grid](a, x, h, T, D, BLOCK_T=_BLOCK_T, BLOCK_D=block_d, num_warps=4)
    return h
