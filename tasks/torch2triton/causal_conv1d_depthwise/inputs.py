"""Inputs for torch2triton/causal_conv1d_depthwise: Mamba-style activations [B, D, L] with a
per-channel scale, conv weights [D, W] at the scale of PyTorch's Conv1d initialisation
(uniform in +-1/sqrt(W)) and a small bias."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    B, D, L, W = int(case["B"]), int(case["D"]), int(case["L"]), int(case["W"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((B, D, L), generator=g, device=device, dtype=torch.float32)
    x.mul_(0.5 + 1.5 * torch.rand((1, D, 1), generator=g, device=device))
    bound = 1.0 / W**0.5
    weight = (2.0 * torch.rand((D, W), generator=g, device=device) - 1.0) * bound
    bias = 0.1 * torch.randn((D,), generator=g, device=device)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "bias": bias.to(dtype)}
