"""Reference for torch2triton/embedding_bag_mean: the mean of each bag's rows in float32."""

import torch


def embedding_bag_mean_reference(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return weight.to(torch.float32)[indices].mean(dim=1)
