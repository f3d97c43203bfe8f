"""Inputs for triton2triton/rms_norm_backward: activations, upstream gradient and the forward's
saved float32 rstd."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    eps = 1e-6
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32)

    def rand(*shape):
        return torch.rand(shape, generator=g, device=device, dtype=torch.float32)

    x = (randn(M, N) * (0.5 + 2.5 * rand(M, 1))).to(dtype)  # residual-stream-like row scales
    weight = (1.0 + 0.2 * randn(N)).to(dtype)
    dy = (randn(M, N) * (0.5 + rand(M, 1))).to(dtype)  # rows of gradient scale 0.5..1.5
    # what the forward pass saved: 1 / rms of the stored (rounded) x, in float32
    rstd = torch.rsqrt(x.float().square().mean(dim=1) + eps)
    return {"x": x, "weight": weight, "dy": dy, "rstd": rstd}
