"""PyTorch eager baseline for torch2triton/embedding_bag_mean (gather, upcast, mean, cast)."""

import torch
import torch.nn.functional as F


def embedding_bag_mean(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = F.embedding(indices, weight)  # [B, L, D], the gathered rows materialised
    return rows.float().mean(dim=1).to(weight.dtype)
