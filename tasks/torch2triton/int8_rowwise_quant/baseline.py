"""Eager PyTorch baseline for torch2triton/int8_rowwise_quant (one kernel per op)."""

import torch


def int8_rowwise_quant(x: torch.Tensor):
    xf = x.float()
    amax = xf.abs().amax(dim=-1)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    q = torch.round(xf / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale
