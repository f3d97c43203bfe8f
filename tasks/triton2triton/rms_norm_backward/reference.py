"""Reference for triton2triton/rms_norm_backward, computed in float64."""

import torch


def rms_norm_backward_reference(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor,
                                rstd: torch.Tensor):
    dyf = dy.double()
    rs = rstd.double()[:, None]
    xhat = x.double() * rs
    wdy = weight.double() * dyf
    dx = (wdy - xhat * (xhat * wdy).mean(dim=1, keepdim=True)) * rs
    return dx, (dyf * xhat).sum(dim=0)
