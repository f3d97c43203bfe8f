"""Reference for torch2triton/batchnorm_relu_inference: eval-mode BatchNorm, residual add and
ReLU in float32."""

import torch


def bn_add_relu_reference(x: torch.Tensor, identity: torch.Tensor, running_mean: torch.Tensor,
                          running_var: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                          eps: float) -> torch.Tensor:
    shape = (1, -1, 1, 1)
    rstd = torch.rsqrt(running_var.float() + eps).view(shape)
    z = (x.float() - running_mean.float().view(shape)) * rstd * weight.float().view(shape)
    return torch.relu(z + bias.float().view(shape) + identity.float())
