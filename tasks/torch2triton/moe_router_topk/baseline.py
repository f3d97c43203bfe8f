"""PyTorch eager baseline for torch2triton/moe_router_topk (softmax, topk, renormalise, cast)."""

import torch


def moe_router_topk(logits: torch.Tensor, k: int):
    probs = torch.softmax(logits, dim=-1)
    weights, ids = torch.topk(probs, k, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)
