"""Row-wise log-sum-exp in Triton: to be written."""

import torch


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    """Return out[i] = log(sum_j exp(x[i, j])) as a float32 tensor [N].

    x: [N, D] bfloat16, contiguous.
    """
    raise NotImplementedError("implement row_logsumexp with a Triton kernel")
