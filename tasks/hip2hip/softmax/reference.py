"""Reference for hip2hip/softmax: row softmax computed in float64."""

import torch


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)
