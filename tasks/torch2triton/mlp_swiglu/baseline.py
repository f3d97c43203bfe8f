"""PyTorch eager baseline for torch2triton/mlp_swiglu: the LLaMA MLP as nn.Module code runs it."""

import torch
import torch.nn.functional as F


def mlp_swiglu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
               w_down: torch.Tensor) -> torch.Tensor:
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)
