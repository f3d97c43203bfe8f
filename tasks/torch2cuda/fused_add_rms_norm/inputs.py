"""Inputs for torch2cuda/fused_add_rms_norm: a layer's output, the residual stream, a weight."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    residual = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    residual.mul_(0.5 + 3.0 * torch.rand((M, 1), generator=g, device=device))
    x = 0.3 * torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    weight = 1.0 + 0.2 * torch.randn((N,), generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(dtype), "residual": residual.to(dtype), "weight": weight.to(dtype),
            "eps": float(case.get("eps", 1e-6))}
