"""Mean-pooled embedding bags in Triton: to be written."""

import torch


def embedding_bag_mean(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Return out [B, D] (weight's dtype) with out[b, :] = mean_l weight[indices[b, l], :].

    indices: [B, L] int64 with values in [0, V), contiguous; weight: [V, D] bfloat16,
    contiguous. The sum is accumulated in float32 and rounded once.
    """
    raise NotImplementedError("implement embedding_bag_mean with a Triton kernel")
