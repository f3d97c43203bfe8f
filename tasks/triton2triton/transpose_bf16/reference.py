"""Reference for triton2triton/transpose_bf16: out = x.T, contiguous, in float32."""

import torch


def transpose_reference(x: torch.Tensor) -> torch.Tensor:
    # bf16 values are exact in float32, so the reference is the exact transpose.
    return x.float().t().contiguous()
