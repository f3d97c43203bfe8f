"""Input factory for triton2triton/gemm_bf16."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    M, N, K = int(case["M"]), int(case["N"]), int(case["K"])
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # Unit-variance A and B scaled by 1/sqrt(K): the product has entries of about unit size.
    a = torch.randn(M, K, generator=g, device=device, dtype=torch.float32).to(dtype)
    b = (torch.randn(K, N, generator=g, device=device, dtype=torch.float32) * K**-0.5).to(dtype)
    return {"a": a, "b": b}
