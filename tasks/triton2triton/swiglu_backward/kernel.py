"""SwiGLU backward (y = silu(gate) * up) in Triton.

Two elementwise kernels: the first computes the gate gradient (reading gate, up and dy), the
second the up gradient (reading gate and dy again and recomputing the sigmoid).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _dgate_kernel(gate_ptr, up_ptr, dy_ptr, dgate_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sig = 1.0 / (1.0 + tl.exp(-g))
    dgate = dy * u * sig * (1.0 + g * (1.0 - sig))
    tl.store(dgate_ptr + offs, dgate.to(dgate_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dup_kernel(gate_ptr, dy_ptr, dup_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sig = 1.0 / (1.0 + tl.exp(-g))
    tl.store(dup_ptr + offs, (dy * g * sig).to(dup_ptr.dtype.element_ty), mask=mask)


def swiglu_backward(gate: torch.Tensor, up: torch.Tensor, dy: torch.Tensor):
    gate = gate.contiguous()
    up = up.contiguous()
    dy = dy.contiguous()
    dgate = torch.empty_like(gate)
    dup = torch.empty_like(up)
    n = gate.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    _dgate_kernel[grid](gate, up, dy, dgate, n, BLOCK=BLOCK, num_warps=4)
    _dup_kernel[grid](gate, dy, dup, n, BLOCK=BLOCK, num_warps=4)
    return dgate, dup
