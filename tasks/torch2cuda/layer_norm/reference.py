"""Reference for torch2cuda/layer_norm, computed in float64."""

import torch


def layer_norm_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                         eps: float) -> torch.Tensor:
    xd = x.double()
    mean = xd.mean(dim=-1, keepdim=True)
    var = (xd - mean).pow(2).mean(dim=-1, keepdim=True)
    return (xd - mean) * torch.rsqrt(var + eps) * weight.double() + bias.double()
