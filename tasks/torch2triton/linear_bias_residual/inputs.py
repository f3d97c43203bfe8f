"""Inputs for torch2triton/linear_bias_residual: an output projection added to the residual stream."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, N, K = int(case["T"]), int(case["N"]), int(case["K"])
    g = torch.Generator(device=device).manual_seed(seed)
    # Unit-scale activations, weights scaled by 1/sqrt(K) (so x @ W^T is about N(0, 1)), a
    # modest bias and a residual stream somewhat larger than the update, as in a transformer.
    x = torch.randn((T, K), generator=g, device=device, dtype=torch.float32)
    weight = torch.randn((N, K), generator=g, device=device, dtype=torch.float32) * K**-0.5
    bias = 0.2 * torch.randn((N,), generator=g, device=device, dtype=torch.float32)
    residual = 1.5 * torch.randn((T, N), generator=g, device=device, dtype=torch.float32)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "bias": bias.to(dtype),
            "residual": residual.to(dtype)}
