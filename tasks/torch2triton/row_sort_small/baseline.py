"""PyTorch eager baseline for torch2triton/row_sort_small."""

import torch


def row_sort_small(x: torch.Tensor):
    values, indices = torch.sort(x, dim=-1)
    return values, indices
