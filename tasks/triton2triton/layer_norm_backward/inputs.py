"""Inputs for triton2triton/layer_norm_backward: activations, upstream gradient and the forward's
saved float32 mean and rstd."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    eps = 1e-5
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32)

    def rand(*shape):
        return torch.rand(shape, generator=g, device=device, dtype=torch.float32)

    x = randn(M, N)
    x.mul_(0.5 + 2.0 * rand(M, 1)).add_(randn(M, 1))  # rows: std 0.5..2.5, mean ~N(0, 1)
    x = x.to(dtype)
    weight = (1.0 + 0.1 * randn(N)).to(dtype)
    dy = (randn(M, N) * (0.5 + rand(M, 1))).to(dtype)  # rows of gradient scale 0.5..1.5
    # what the forward pass saved: statistics of the stored (rounded) x, in float32
    xf = x.float()
    mean = xf.mean(dim=1)
    rstd = torch.rsqrt((xf - mean[:, None]).square().mean(dim=1) + eps)
    return {"x": x, "weight": weight, "dy": dy, "mean": mean, "rstd": rstd}
