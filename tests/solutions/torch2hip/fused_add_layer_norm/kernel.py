"""fused_add_layer_norm in HIP: kernel.hip, built when this module is imported.

One kernel, one block per row: the residual add, the mean and the variance (from the row held
in registers) and the normalisation, with 16-byte vector accesses (see kernel.hip).
"""

import torch
from aka_backend_hip import load

_lib = load("kernel.hip", functions=["fused_add_layer_norm_bf16"])


def fused_add_layer_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                         bias: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (layer_norm(x + residual) * weight + bias, x + residual), all bfloat16."""
    tensors = (x, residual, weight, bias)
    if any(t.dtype != torch.bfloat16 for t in tensors):
        raise TypeError("fused_add_layer_norm expects bfloat16 tensors")
    x, residual, weight, bias = (t.contiguous() for t in tensors)
    M, N = x.shape
    y = torch.empty_like(x)
    r = torch.empty_like(x)
    _lib.fused_add_layer_norm_bf16(x, residual, weight, bias, y, r, M, N, float(eps))
    return y, r
