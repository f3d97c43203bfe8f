"""Inputs for cuda2cuda/gemv_bf16: a weight matrix (std 0.02) times one token's activations."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, K = int(case["M"]), int(case["K"])
    g = torch.Generator(device=device).manual_seed(seed)
    a = 0.02 * torch.randn((M, K), generator=g, device=device, dtype=torch.float32)
    x = torch.randn((K,), generator=g, device=device, dtype=torch.float32)
    return {"a": a.to(dtype), "x": x.to(dtype)}
