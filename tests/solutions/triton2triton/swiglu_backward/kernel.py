"""SwiGLU backward in Triton: one elementwise pass, each input read from HBM once.

One kernel loads gate, up and dy once, computes the sigmoid once (exp2 in the log2 domain) and
writes both gradients: 10 bytes of HBM traffic per element instead of 14 for two kernels that
each re-read gate and dy. Each program handles 4096 elements with 8 warps (16 per thread, so
two 16-byte vector loads per tensor in flight per thread); offsets are int64.
"""

import torch
import triton
import triton.language as tl

_BLOCK = 4096


@triton.jit
def _swiglu_bwd_kernel(gate_ptr, up_ptr, dy_ptr, dgate_ptr, dup_ptr, n_elements,
                       BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sig = 1.0 / (1.0 + tl.exp2(-g * LOG2E))
    silu = g * sig
    dgate = dy * u * (sig + silu * (1.0 - sig))
    tl.store(dgate_ptr + offs, dgate.to(dgate_ptr.dtype.element_ty), mask=mask)
    tl.store(dup_ptr + offs, (dy * silu).to(dup_ptr.dtype.element_ty), mask=mask)


def swiglu_backward(gate: torch.Tensor, up: torch.Tensor, dy: torch.Tensor):
    gate = gate.contiguous()
    up = up.contiguous()
    dy = dy.contiguous()
    dgate = torch.empty_like(gate)
    dup = torch.empty_like(up)
    n = gate.numel()
    if n == 0:
        return dgate, dup
    block = min(_BLOCK, triton.next_power_of_2(n))
    _swiglu_bwd_kernel[(triton.cdiv(n, block),)](gate, up, dy, dgate, dup, n, BLOCK=block,
                                                 num_warps=max(1, min(8, block // 512)))
    return dgate, dup
