"""Reference for torch2triton/moe_router_topk: float64 softmax, top-k, renormalised weights."""

import torch


def moe_router_topk_reference(logits: torch.Tensor, k: int):
    probs = torch.softmax(logits.to(torch.float64), dim=-1)
    weights, ids = torch.topk(probs, k, dim=-1, largest=True, sorted=True)
    return weights / weights.sum(dim=-1, keepdim=True), ids
