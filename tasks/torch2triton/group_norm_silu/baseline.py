"""PyTorch eager baseline for torch2triton/group_norm_silu."""

import torch
import torch.nn.functional as F


def group_norm_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, num_groups: int,
                    eps: float) -> torch.Tensor:
    return F.silu(F.group_norm(x, num_groups, weight, bias, eps))
