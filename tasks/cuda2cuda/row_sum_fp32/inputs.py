"""Inputs for cuda2cuda/row_sum_fp32: float32 rows with different means (sums of either sign)."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    offset = -0.5 + 1.5 * torch.rand((M, 1), generator=g, device=device, dtype=torch.float32)
    x.mul_(0.5).add_(offset)
    return {"x": x}
