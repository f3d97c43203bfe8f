"""Inputs for torch2triton/layer_norm_residual_gelu: a block's output, the residual stream with
per-row scale and offset, LayerNorm weight and bias."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, H = int(case["T"]), int(case["H"])
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32)

    def rand(*shape):
        return torch.rand(shape, generator=g, device=device, dtype=torch.float32)

    residual = randn(T, H)
    # rows: std 0.5..2.5, mean ~N(0, 0.25^2)
    residual.mul_(0.5 + 2.0 * rand(T, 1)).add_(0.25 * randn(T, 1))
    x = 0.5 * randn(T, H)
    weight = 1.0 + 0.1 * randn(H)
    bias = 0.1 * randn(H)
    return {
        "x": x.to(dtype),
        "residual": residual.to(dtype),
        "weight": weight.to(dtype),
        "bias": bias.to(dtype),
        "eps": float(case.get("eps", 1e-5)),
    }
