"""Reference for torch2triton/moe_combine: routing-weighted sum of each token's k expert rows, in float64."""

import torch


def moe_combine_reference(y: torch.Tensor, inv_perm: torch.Tensor, weights: torch.Tensor):
    T, k = weights.shape
    rows = y.double()[inv_perm].view(T, k, -1)
    return (rows * weights.double().unsqueeze(-1)).sum(dim=1)
