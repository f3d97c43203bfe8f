"""Reference for cuda2cuda/softmax_rows_naive: row softmax computed in float64."""

import torch


def softmax_rows_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)
