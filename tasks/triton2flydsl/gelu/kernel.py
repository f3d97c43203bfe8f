"""GELU (tanh approximation) in FlyDSL: to be written (the Triton baseline is baseline.py)."""

import torch


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Return 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))), computed in float32.

    x: [M, N] contiguous, bfloat16. The result is a new tensor like x.
    """
    raise NotImplementedError("implement gelu with a FlyDSL kernel (@flyc.kernel launched from @flyc.jit)")
