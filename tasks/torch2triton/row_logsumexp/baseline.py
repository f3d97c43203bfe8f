"""PyTorch eager baseline for torch2triton/row_logsumexp."""

import torch


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(x.float(), dim=-1)
