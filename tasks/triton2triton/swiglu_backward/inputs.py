"""Inputs for triton2triton/swiglu_backward: MLP gate and up projections and the gradient of
y = silu(gate) * up."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32)

    gate = randn(M, N).mul_(1.5).sub_(0.5)  # pre-activations, mostly in [-5, 4]
    up = randn(M, N)
    dy = randn(M, N).mul_(0.5 + torch.rand((M, 1), generator=g, device=device))
    return {"gate": gate.to(dtype), "up": up.to(dtype), "dy": dy.to(dtype)}
