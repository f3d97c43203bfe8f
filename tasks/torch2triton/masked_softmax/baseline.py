"""PyTorch eager baseline for torch2triton/masked_softmax."""

import torch


def masked_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = x.float().masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1).to(x.dtype)
