"""Inputs for torch2flydsl/rms_norm: residual-stream-like activations, per-row scale."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    scale = 0.5 + 2.5 * torch.rand((M, 1), generator=g, device=device, dtype=torch.float32)
    x.mul_(scale)
    weight = 1.0 + 0.2 * torch.randn((N,), generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "eps": float(case.get("eps", 1e-6))}
