"""PyTorch eager baseline for torch2cuda/layer_norm: the formula written out, one kernel per step."""

import torch


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               eps: float) -> torch.Tensor:
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    centered = xf - mean
    var = centered.pow(2).mean(dim=-1, keepdim=True)
    y = centered * torch.rsqrt(var + eps) * weight.float() + bias.float()
    return y.to(x.dtype)
