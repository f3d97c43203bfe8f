"""Inputs for hip2hip/transpose: a bf16 matrix (a weight or an activation block)."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(dtype)}
