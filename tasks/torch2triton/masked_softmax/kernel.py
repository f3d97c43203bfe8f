"""Masked row softmax in Triton: to be written."""

import torch


def masked_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Return softmax over the last dim of x with masked positions (mask True) at -inf.

    x: [N, D] bfloat16 (float16 in the CPU smoke case), contiguous;
    mask: [N, D] bool, contiguous, True = masked out.
    Returns a new [N, D] tensor of x's dtype (masked positions are 0).
    """
    raise NotImplementedError("implement masked_softmax with a Triton kernel")
