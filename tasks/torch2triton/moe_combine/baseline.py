"""PyTorch eager baseline for torch2triton/moe_combine (gather, weight, sum over the top-k)."""

import torch


def moe_combine(y: torch.Tensor, inv_perm: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    T, k = weights.shape
    gathered = y[inv_perm].view(T, k, -1)  # materialises [T, k, D]
    return (gathered.float() * weights.unsqueeze(-1)).sum(dim=1).to(y.dtype)
