"""PyTorch eager baseline for torch2triton/topk_softmax_probs."""

import torch

TOP_K = 8


def topk_softmax_probs(logits: torch.Tensor):
    probs = torch.softmax(logits.float(), dim=-1)
    values, indices = torch.topk(probs, TOP_K, dim=-1)
    return values, indices
