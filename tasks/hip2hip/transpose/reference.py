"""Reference for hip2hip/transpose: PyTorch's transposed copy (exact)."""

import torch


def transpose_reference(x: torch.Tensor) -> torch.Tensor:
    return x.t().contiguous()
