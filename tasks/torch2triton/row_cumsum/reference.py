"""Reference for torch2triton/row_cumsum: the inclusive prefix sum of each row, in float64."""

import torch


def row_cumsum_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x.double(), dim=-1)
