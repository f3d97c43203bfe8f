"""PyTorch eager baseline for torch2triton/linear_recurrence_scan: a Python loop over chunks of
16 time steps, each solved in closed form with a cumulative product and a cumulative sum:
within a chunk h_t = P_t * (h_start + sum_{s<=t} x_s / P_s), P_t = a_1 * ... * a_t. With gates
in (0.5, 1), P stays above 0.5**16, so the division loses nothing in float32.

About six kernels per chunk (not two per time step): a block of calls stays within what the
GPU's launch queue holds while the judge holds it back."""

import torch

CHUNK = 16


def linear_recurrence_scan(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    B, T, D = x.shape
    af, xf = a.float(), x.float()
    h = torch.zeros((B, 1, D), dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    for start in range(0, T, CHUNK):
        p = torch.cumprod(af[:, start:start + CHUNK], dim=1)
        states = p * (torch.cumsum(xf[:, start:start + CHUNK] / p, dim=1) + h)
        out[:, start:start + CHUNK] = states
        h = states[:, -1:]
    return out
