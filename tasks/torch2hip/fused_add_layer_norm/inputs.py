"""Inputs for torch2hip/fused_add_layer_norm: a block's output, the residual stream, LN params."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32)

    def rand(*shape):
        return torch.rand(shape, generator=g, device=device, dtype=torch.float32)

    residual = randn(M, N)
    residual.mul_(0.5 + 2.0 * rand(M, 1)).add_(randn(M, 1))  # rows: std 0.5..2.5, mean ~N(0, 1)
    x = 0.5 * randn(M, N)
    weight = 1.0 + 0.1 * randn(N)
    bias = 0.1 * randn(N)
    return {
        "x": x.to(dtype),
        "residual": residual.to(dtype),
        "weight": weight.to(dtype),
        "bias": bias.to(dtype),
        "eps": float(case.get("eps", 1e-5)),
    }
