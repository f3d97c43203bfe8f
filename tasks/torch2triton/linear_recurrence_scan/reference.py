"""Reference for torch2triton/linear_recurrence_scan: the recurrence stepped in float64."""

import torch


def linear_recurrence_scan_reference(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ad, xd = a.double(), x.double()
    B, T, D = x.shape
    h = torch.zeros((B, D), dtype=torch.float64, device=x.device)
    out = torch.empty((B, T, D), dtype=torch.float64, device=x.device)
    for t in range(T):
        h = ad[:, t] * h + xd[:, t]
        out[:, t] = h
    return out
