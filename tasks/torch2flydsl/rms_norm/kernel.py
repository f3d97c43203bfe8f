"""RMSNorm in FlyDSL: to be written (the PyTorch baseline is baseline.py)."""

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Return x / sqrt(mean(x**2, dim=-1) + eps) * weight, computed in float32.

    x: [M, N] contiguous, bfloat16; weight: [N], bfloat16. The result is a new tensor like x.
    """
    raise NotImplementedError("implement rms_norm with a FlyDSL kernel (@flyc.kernel launched from "
                              "@flyc.jit)")
