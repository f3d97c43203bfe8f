"""Inputs for torch2triton/mlp_swiglu: LLaMA-style MLP activations and weights."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, D, F = int(case["T"]), int(case["D"]), int(case["F"])
    g = torch.Generator(device=device).manual_seed(seed)
    # Unit-scale (normalised) activations; gate and up weights scaled by 1/sqrt(D) so the
    # pre-activations are about N(0, 1) (both sides of SiLU); E[silu(g)^2 u^2] is about
    # 0.357, so the down weights are scaled to give outputs of about unit size.
    x = torch.randn((T, D), generator=g, device=device, dtype=torch.float32)
    w_gate = torch.randn((F, D), generator=g, device=device, dtype=torch.float32) * D**-0.5
    w_up = torch.randn((F, D), generator=g, device=device, dtype=torch.float32) * D**-0.5
    w_down = torch.randn((D, F), generator=g, device=device, dtype=torch.float32)
    w_down.mul_((0.357 * F) ** -0.5)
    return {"x": x.to(dtype), "w_gate": w_gate.to(dtype), "w_up": w_up.to(dtype),
            "w_down": w_down.to(dtype)}
