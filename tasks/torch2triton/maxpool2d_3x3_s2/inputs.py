"""Inputs for torch2triton/maxpool2d_3x3_s2: stem feature maps [N, C, H, W] (NCHW) with a
per-channel scale and shift. The values are signed (as before a ReLU), so a window whose
in-image values are all negative tells -inf padding from zero padding."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, C, H, W = int(case["N"]), int(case["C"]), int(case["H"]), int(case["W"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, C, H, W), generator=g, device=device, dtype=torch.float32)
    x.mul_(0.5 + 1.5 * torch.rand((1, C, 1, 1), generator=g, device=device))
    x.sub_(0.5 * torch.rand((1, C, 1, 1), generator=g, device=device))
    return {"x": x.to(dtype)}
