"""Inputs for torch2triton/group_norm_silu: diffusion-UNet feature maps [N, C, H, W] (NCHW)
with a per-channel scale and a non-zero per-channel mean, GroupNorm affine parameters near
(1, 0), 32 groups, eps 1e-5."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, C, H, W = int(case["N"]), int(case["C"]), int(case["H"]), int(case["W"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, C, H, W), generator=g, device=device, dtype=torch.float32)
    x.mul_(0.5 + 2.0 * torch.rand((1, C, 1, 1), generator=g, device=device))
    x.add_(torch.randn((N, C, 1, 1), generator=g, device=device))
    weight = 1.0 + 0.2 * torch.randn((C,), generator=g, device=device)
    bias = 0.2 * torch.randn((C,), generator=g, device=device)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "bias": bias.to(dtype),
            "num_groups": int(case["G"]), "eps": float(case.get("eps", 1e-5))}
