"""Inputs for triton2triton/gelu: pre-activation values, roughly N(0, 2^2)."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    x.mul_(2.0)
    return {"x": x.to(dtype)}
