"""silu_and_mul in HIP: kernel.hip, built when this module is imported.

One fused kernel reads the gate and the up projection once, with 16-byte vector accesses, and
writes silu(gate) * up (see kernel.hip).
"""

import torch
from aka_backend_hip import load

_lib = load("kernel.hip", functions=["silu_and_mul_bf16"])


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """Return silu(x[:, :N]) * x[:, N:] for x of shape [M, 2N] (bfloat16)."""
    if x.dtype != torch.bfloat16 or x.dim() != 2 or x.shape[1] % 2:
        raise TypeError("silu_and_mul expects a bfloat16 tensor [M, 2N]")
    x = x.contiguous()
    M, N = x.shape[0], x.shape[1] // 2
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _lib.silu_and_mul_bf16(x, out, M, N)
    return out
