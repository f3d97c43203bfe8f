"""Input factory for torch2triton/gemm_bias_gelu."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    M, N, K = int(case["M"]), int(case["N"]), int(case["K"])
    dtype = getattr(torch, case["dtype"])
    g = torch.Generator(device=device).manual_seed(seed)
    # Activations of unit scale, weights scaled by 1/sqrt(K), a modest bias: the
    # pre-activation is about N(0, 1.25), which exercises both sides of GELU.
    a = torch.randn(M, K, generator=g, device=device, dtype=torch.float32).to(dtype)
    b = (torch.randn(K, N, generator=g, device=device, dtype=torch.float32) * K**-0.5).to(dtype)
    bias = (torch.randn(N, generator=g, device=device, dtype=torch.float32) * 0.5).to(dtype)
    return {"a": a, "b": b, "bias": bias}
