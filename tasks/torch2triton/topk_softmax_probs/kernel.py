"""Top-8 softmax probabilities of every row of the logits, in Triton: to be written."""

import torch

TOP_K = 8


def topk_softmax_probs(logits: torch.Tensor):
    """Return (values, indices): the 8 largest softmax probabilities of every row, descending.

    logits: [M, V] bfloat16, contiguous. values: float32 [M, 8], the probabilities
    softmax(logits[i, :]) at indices[i, :]; indices: int64 [M, 8].
    """
    raise NotImplementedError("implement topk_softmax_probs with a Triton kernel")
