"""Inputs for torch2triton/row_cumsum: per-position increments (scores, log-gates) with a
per-row spread and a small per-row drift, so the prefix sums both wander around zero and grow
to a few thousand."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, D = int(case["N"]), int(case["D"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, D), generator=g, device=device, dtype=torch.float32)
    spread = 0.5 + 1.5 * torch.rand((N, 1), generator=g, device=device)
    drift = 0.05 * torch.randn((N, 1), generator=g, device=device)
    x.mul_(spread).add_(drift)
    return {"x": x.to(dtype)}
