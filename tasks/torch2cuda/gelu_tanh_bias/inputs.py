"""Inputs for torch2cuda/gelu_tanh_bias: an MLP's up-projection output (before its bias) and bias."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    x.mul_(1.5)
    bias = 0.5 * torch.randn((N,), generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(dtype), "bias": bias.to(dtype)}
