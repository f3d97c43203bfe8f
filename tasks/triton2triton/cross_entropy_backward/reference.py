"""Reference for triton2triton/cross_entropy_backward, computed in float64."""

import torch

IGNORE_INDEX = -100


def cross_entropy_backward_reference(logits: torch.Tensor, labels: torch.Tensor,
                                     grad: torch.Tensor) -> torch.Tensor:
    valid = labels != IGNORE_INDEX
    n_valid = valid.sum().double()
    p = torch.softmax(logits.double(), dim=-1)
    rows = torch.nonzero(valid).squeeze(-1)
    p[rows, labels[rows]] -= 1.0
    p *= (grad.double() / n_valid) * valid.double()[:, None]
    return p
