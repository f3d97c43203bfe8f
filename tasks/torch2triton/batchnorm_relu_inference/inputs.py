"""Inputs for torch2triton/batchnorm_relu_inference: a conv output x [N, C, H, W] (NCHW) with
per-channel statistics, running statistics close to them, BatchNorm affine parameters near
(1, 0), and a non-negative identity branch (the previous block's ReLU output). Running
statistics and affine parameters are float32, as a mixed-precision ResNet keeps them."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, C, H, W = int(case["N"]), int(case["C"]), int(case["H"]), int(case["W"])
    g = torch.Generator(device=device).manual_seed(seed)
    mu = torch.randn((C,), generator=g, device=device)
    sigma = 0.3 + 2.0 * torch.rand((C,), generator=g, device=device)
    x = torch.randn((N, C, H, W), generator=g, device=device, dtype=torch.float32)
    x.mul_(sigma.view(1, C, 1, 1)).add_(mu.view(1, C, 1, 1))
    running_mean = mu + 0.1 * sigma * torch.randn((C,), generator=g, device=device)
    running_var = sigma**2 * (0.8 + 0.4 * torch.rand((C,), generator=g, device=device))
    weight = 1.0 + 0.2 * torch.randn((C,), generator=g, device=device)
    bias = 0.1 * torch.randn((C,), generator=g, device=device)
    identity = torch.relu(torch.randn((N, C, H, W), generator=g, device=device))
    return {"x": x.to(dtype), "identity": identity.to(dtype), "running_mean": running_mean,
            "running_var": running_var, "weight": weight, "bias": bias,
            "eps": float(case.get("eps", 1e-5))}
