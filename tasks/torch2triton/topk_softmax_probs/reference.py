"""Reference for torch2triton/topk_softmax_probs: float64 softmax, then the top 8."""

import torch

TOP_K = 8


def topk_softmax_probs_reference(logits: torch.Tensor):
    probs = torch.softmax(logits.double(), dim=-1)
    values, indices = torch.topk(probs, TOP_K, dim=-1)
    return values, indices
