"""Reference for torch2triton/batch_norm_train_nhwc: batch statistics and normalization in float64."""

import torch


def batch_norm_train_nhwc_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                                    eps: float):
    C = x.shape[-1]
    xd = x.double().reshape(-1, C)
    mean = xd.mean(dim=0)
    var = (xd - mean).square().mean(dim=0)
    y = (xd - mean) / torch.sqrt(var + eps) * weight.double() + bias.double()
    return y.reshape(x.shape), mean, var
