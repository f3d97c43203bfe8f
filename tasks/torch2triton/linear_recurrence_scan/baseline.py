"""PyTorch eager baseline for torch2triton/linear_recurrence_scan: a Python loop over time."""

import torch


def linear_recurrence_scan(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    B, T, D = x.shape
    af, xf = a.float(), x.float()
    h = torch.zeros((B, D), dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    for t in range(T):
        h = torch.addcmul(xf[:, t], af[:, t], h)  # a_t * h_{t-1} + x_t
        out[:, t] = h
    return out
