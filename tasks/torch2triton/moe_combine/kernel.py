"""MoE output combine in Triton: to be written."""

import torch


def moe_combine(y: torch.Tensor, inv_perm: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Return out[t] = sum_j weights[t, j] * y[inv_perm[t * k + j]] as bfloat16 [T, D].

    y: [T * k, D] bfloat16 (expert outputs, rows grouped by expert); inv_perm: [T * k] int64,
    a permutation; weights: [T, k] float32. All contiguous.
    """
    raise NotImplementedError("implement moe_combine with a Triton kernel")
