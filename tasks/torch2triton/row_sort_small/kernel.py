"""Ascending sort of every row of a float32 [M, N] tensor, in Triton: to be written."""

import torch


def row_sort_small(x: torch.Tensor):
    """Return (values, indices): every row of x sorted ascending, and where each value came from.

    x: [M, N] float32, contiguous, N <= 2048, the values of a row distinct. values: float32
    [M, N] with values[i, j] = x[i, indices[i, j]]; indices: int64 [M, N].
    """
    raise NotImplementedError("implement row_sort_small with a Triton kernel")
