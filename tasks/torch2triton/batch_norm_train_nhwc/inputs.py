"""Inputs for torch2triton/batch_norm_train_nhwc: convolution outputs in channels-last layout,
each channel with its own mean (up to a few units off zero) and spread, and BatchNorm affine
parameters near their initial values."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, H, W, C = (int(case[k]) for k in ("N", "H", "W", "C"))
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, H, W, C), generator=g, device=device, dtype=torch.float32)
    std = 0.3 + 1.7 * torch.rand((C,), generator=g, device=device)
    mean = 1.5 * torch.randn((C,), generator=g, device=device)
    x.mul_(std).add_(mean)
    weight = 1.0 + 0.2 * torch.randn((C,), generator=g, device=device)
    bias = 0.1 * torch.randn((C,), generator=g, device=device)
    return {"x": x.to(dtype), "weight": weight, "bias": bias, "eps": float(case.get("eps", 1e-5))}
