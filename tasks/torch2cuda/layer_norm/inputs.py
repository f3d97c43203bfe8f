"""Inputs for torch2cuda/layer_norm: activations with a per-row offset and scale, affine params."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    scale = 0.5 + 2.5 * torch.rand((M, 1), generator=g, device=device, dtype=torch.float32)
    shift = torch.randn((M, 1), generator=g, device=device, dtype=torch.float32)
    x.mul_(scale).add_(shift)
    weight = 1.0 + 0.2 * torch.randn((N,), generator=g, device=device, dtype=torch.float32)
    bias = 0.1 * torch.randn((N,), generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "bias": bias.to(dtype),
            "eps": float(case.get("eps", 1e-5))}
