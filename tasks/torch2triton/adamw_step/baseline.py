"""PyTorch eager baseline for torch2triton/adamw_step (torch.optim.AdamW's single-tensor math)."""

import math

import torch


def adamw_step(
    p: torch.Tensor,
    g: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
):
    p = p * (1.0 - lr * weight_decay)
    m = m * beta1 + g * (1.0 - beta1)
    v = v * beta2 + g * g * (1.0 - beta2)
    bias_correction1 = 1.0 - beta1**step
    bias_correction2 = 1.0 - beta2**step
    denom = v.sqrt() / math.sqrt(bias_correction2) + eps
    p = p - (lr / bias_correction1) * (m / denom)
    return p, m, v
