"""PyTorch eager baseline for torch2triton/row_cumsum."""

import torch


def row_cumsum(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x.float(), dim=-1)
