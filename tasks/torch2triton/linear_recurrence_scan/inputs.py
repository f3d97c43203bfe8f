"""Inputs for torch2triton/linear_recurrence_scan: decay gates in (0.5, 1) and inputs of an
RG-LRU / Mamba-style diagonal recurrence. Most gates lie close to 1 (long memory, the state
grows well above the size of one input), some decay quickly."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    B, T, D = int(case["B"]), int(case["T"]), int(case["D"])
    g = torch.Generator(device=device).manual_seed(seed)
    # a = 1 - 0.5 * u**3, u uniform: mostly near 1, all in (0.5, 1); bf16 rounding keeps it
    # in [0.5, 1], and the clamp keeps it off 1.0 itself
    u = torch.rand((B, T, D), generator=g, device=device, dtype=torch.float32)
    a = (1.0 - 0.5 * u.pow(3)).clamp(0.5, 0.996)
    x = torch.randn((B, T, D), generator=g, device=device, dtype=torch.float32)
    # per-channel input scale and a small per-channel bias (the state is not centred)
    scale = 0.2 + 0.8 * torch.rand((1, 1, D), generator=g, device=device)
    bias = 0.05 * torch.randn((1, 1, D), generator=g, device=device)
    x.mul_(scale).add_(bias)
    return {"a": a.to(dtype), "x": x.to(dtype)}
