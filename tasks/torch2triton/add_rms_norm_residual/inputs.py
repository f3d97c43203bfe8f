"""Inputs for torch2triton/add_rms_norm_residual: a layer's output, the residual stream, a weight."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, H = int(case["T"]), int(case["H"])
    g = torch.Generator(device=device).manual_seed(seed)
    # the residual stream: per-token scale 0.5..3.5; the layer's output added to it is smaller
    residual = torch.randn((T, H), generator=g, device=device, dtype=torch.float32)
    residual.mul_(0.5 + 3.0 * torch.rand((T, 1), generator=g, device=device))
    x = 0.3 * torch.randn((T, H), generator=g, device=device, dtype=torch.float32)
    weight = 1.0 + 0.2 * torch.randn((H,), generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(dtype), "residual": residual.to(dtype), "weight": weight.to(dtype),
            "eps": float(case.get("eps", 1e-6))}
