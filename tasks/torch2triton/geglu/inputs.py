"""Inputs for torch2triton/geglu: the fused gate/up projection output of a GeGLU MLP."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, H = int(case["T"]), int(case["H"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((T, 2 * H), generator=g, device=device, dtype=torch.float32)
    x.mul_(2.0)
    return {"x": x.to(dtype)}
