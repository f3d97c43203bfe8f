"""Reference for torch2triton/row_logsumexp: the log-sum-exp of each row, in float64."""

import torch


def row_logsumexp_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(x.double(), dim=-1)
