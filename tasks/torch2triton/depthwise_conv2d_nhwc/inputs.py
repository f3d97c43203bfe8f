"""Inputs for torch2triton/depthwise_conv2d_nhwc: MobileNet/EfficientNet-style channels-last
activations [N, H, W, C] with a per-channel scale and shift, 3x3 depthwise weights [C, 3, 3]
at the scale of PyTorch's Conv2d initialisation (uniform in +-1/3) and a small bias."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, H, W, C = int(case["N"]), int(case["H"]), int(case["W"]), int(case["C"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, H, W, C), generator=g, device=device, dtype=torch.float32)
    x.mul_(0.5 + torch.rand((C,), generator=g, device=device))
    x.add_(0.5 * torch.randn((C,), generator=g, device=device))
    weight = (2.0 * torch.rand((C, 3, 3), generator=g, device=device) - 1.0) / 3.0
    bias = 0.1 * torch.randn((C,), generator=g, device=device)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "bias": bias.to(dtype)}
