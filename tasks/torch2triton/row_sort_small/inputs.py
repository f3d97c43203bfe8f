"""Inputs for torch2triton/row_sort_small: rows of Gaussian-looking float32 scores (per-row
spread and offset) whose values are all distinct, so the sorted order and the indices are
unambiguous."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    # A random permutation of 0..N-1 per row ranks the values; each rank, jittered by at most
    # +-0.4, is mapped through the normal quantile function: every row looks like N Gaussian
    # samples, yet neighbouring ranks differ by at least 0.2 / N quantiles (far more than a
    # float32 unit), so there are no ties.
    rank = torch.rand((M, N), generator=g, device=device).argsort(dim=-1).to(torch.float64)
    jitter = 0.8 * (torch.rand((M, N), generator=g, device=device, dtype=torch.float64) - 0.5)
    z = torch.special.ndtri((rank + 0.5 + jitter) / N)
    spread = 0.5 + 2.0 * torch.rand((M, 1), generator=g, device=device, dtype=torch.float64)
    offset = torch.randn((M, 1), generator=g, device=device, dtype=torch.float64)
    return {"x": (z * spread + offset).to(torch.float32).contiguous()}
