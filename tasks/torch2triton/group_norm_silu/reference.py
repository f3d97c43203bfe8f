"""Reference for torch2triton/group_norm_silu: float32 GroupNorm (two-pass statistics) + SiLU."""

import torch
import torch.nn.functional as F


def group_norm_silu_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                              num_groups: int, eps: float) -> torch.Tensor:
    y = F.group_norm(x.float(), num_groups, weight.float(), bias.float(), eps)
    return F.silu(y)
