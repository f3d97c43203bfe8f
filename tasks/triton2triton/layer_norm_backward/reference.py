"""Reference for triton2triton/layer_norm_backward, computed in float64."""

import torch


def layer_norm_backward_reference(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor,
                                  mean: torch.Tensor, rstd: torch.Tensor):
    xf, dyf = x.double(), dy.double()
    rs = rstd.double()[:, None]
    xhat = (xf - mean.double()[:, None]) * rs
    wdy = weight.double() * dyf
    c1 = (xhat * wdy).mean(dim=1, keepdim=True)
    c2 = wdy.mean(dim=1, keepdim=True)
    dx = (wdy - xhat * c1 - c2) * rs
    return dx, (dyf * xhat).sum(dim=0), dyf.sum(dim=0)
