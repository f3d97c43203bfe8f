"""Reference for torch2cuda/softmax_rows: row softmax computed in float64."""

import torch


def softmax_rows_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)
