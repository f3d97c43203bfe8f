"""MoE router top-k (softmax, top-k, renormalise) in Triton: to be written."""

import torch


def moe_router_topk(logits: torch.Tensor, k: int):
    """Return (weights, ids) for the k most probable experts of every token.

    logits: [T, E] float32, contiguous. weights: float32 [T, k], the softmax probabilities of
    the chosen experts renormalised to sum to 1, in descending order; ids: int32 [T, k], the
    matching expert indices.
    """
    raise NotImplementedError("implement moe_router_topk with a Triton kernel")
