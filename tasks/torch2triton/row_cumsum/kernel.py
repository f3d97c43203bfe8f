"""Row-wise prefix sum (cumsum) in Triton: to be written."""

import torch


def row_cumsum(x: torch.Tensor) -> torch.Tensor:
    """Return out[i, j] = sum_{k <= j} x[i, k] as a new float32 tensor [N, D].

    x: [N, D] bfloat16, contiguous.
    """
    raise NotImplementedError("implement row_cumsum with a Triton kernel")
