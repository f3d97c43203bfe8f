"""One fused AdamW update in Triton: each element of p, g, m, v read once, p, m, v written once.

The bias corrections are host scalars folded into two constants (lr / bc1 and
1 / sqrt(bc2)), so the kernel is a single streaming pass: 16 bytes in and 12 bytes out per
element, with 4 float32 values (one 16-byte vector) per thread and array.
"""

import math

import torch
import triton
import triton.language as tl

_BLOCK = 4096


@triton.jit
def _adamw_kernel(
    p_ptr,
    g_ptr,
    m_ptr,
    v_ptr,
    p_out,
    m_out,
    v_out,
    N,
    beta1,
    beta2,
    eps,
    decay,
    step_size,
    inv_sqrt_bc2,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    m = tl.load(m_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    denom = tl.sqrt(v) * inv_sqrt_bc2 + eps
    p = p * decay - step_size * (m / denom)
    tl.store(p_out + offs, p, mask=mask)
    tl.store(m_out + offs, m, mask=mask)
    tl.store(v_out + offs, v, mask=mask)


def adamw_step(
    p: torch.Tensor,
    g: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
):
    p, g, m, v = (t.contiguous() for t in (p, g, m, v))
    N = p.numel()
    p_new, m_new, v_new = torch.empty_like(p), torch.empty_like(m), torch.empty_like(v)
    if N == 0:
        return p_new, m_new, v_new
    step_size = lr / (1.0 - beta1**step)
    inv_sqrt_bc2 = 1.0 / math.sqrt(1.0 - beta2**step)
    BLOCK = min(_BLOCK, triton.next_power_of_2(N))
    _adamw_kernel[(triton.cdiv(N, BLOCK),)](
        p,
        g,
        m,
        v,
        p_new,
        m_new,
        v_new,
        N,
        beta1,
        beta2,
        eps,
        1.0 - lr * weight_decay,
        step_size,
        inv_sqrt_bc2,
        BLOCK=BLOCK,
        num_warps=max(1, min(8, BLOCK // 512)),
    )
    return p_new, m_new, v_new
