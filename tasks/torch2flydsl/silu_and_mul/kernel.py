"""SiLU-and-mul in FlyDSL: to be written (the PyTorch baseline is baseline.py)."""

import torch


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """Return silu(x[:, :N]) * x[:, N:] for x of shape [M, 2N], computed in float32.

    x: [M, 2N] contiguous, bfloat16. The result is a new contiguous [M, N] tensor of x's dtype.
    """
    raise NotImplementedError("implement silu_and_mul with a FlyDSL kernel (@flyc.kernel launched from "
                              "@flyc.jit)")
