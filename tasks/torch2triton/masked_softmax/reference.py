"""Reference for torch2triton/masked_softmax: row softmax with masked positions at -inf, in
float64."""

import torch


def masked_softmax_reference(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double().masked_fill(mask, float("-inf")), dim=-1)
