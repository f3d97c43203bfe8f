"""Inputs for torch2triton/l2_normalize_rows: embedding vectors of widely varying norms sharing a
common offset direction, with one all-zero (padding) row."""

import math

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, D = int(case["N"]), int(case["D"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, D), generator=g, device=device, dtype=torch.float32)
    x.add_(0.3 * torch.randn((D,), generator=g, device=device, dtype=torch.float32))
    # per-row scale log-uniform in [0.1, 10]: row norms from about 0.1 * sqrt(D) to 10 * sqrt(D)
    log_scale = math.log(0.1) + math.log(100.0) * torch.rand((N, 1), generator=g, device=device)
    x.mul_(log_scale.exp())
    x[N // 2].zero_()  # a padding row: its output must be zeros (norm clamped to 1e-12)
    return {"x": x.to(dtype)}
