"""PyTorch eager baseline for torch2triton/batchnorm_relu_inference: the tail of a ResNet
bottleneck block in eval mode (bn3, += identity, relu), three kernels."""

import torch
import torch.nn.functional as F


def bn_add_relu(x: torch.Tensor, identity: torch.Tensor, running_mean: torch.Tensor,
                running_var: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                eps: float) -> torch.Tensor:
    out = F.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=eps)
    out = out + identity
    return F.relu(out)
