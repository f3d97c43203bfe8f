"""Inputs for triton2triton/skinny_gemm_splitk: a few token rows times a large linear layer's
weight (decode / small-batch inference)."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N, K = int(case["M"]), int(case["N"]), int(case["K"])
    g = torch.Generator(device=device).manual_seed(seed)
    # unit-variance activations and weights scaled by 1/sqrt(K): outputs of about unit size
    x = torch.randn((M, K), generator=g, device=device, dtype=torch.float32)
    weight = torch.randn((N, K), generator=g, device=device, dtype=torch.float32) * K**-0.5
    return {"x": x.to(dtype), "weight": weight.to(dtype)}
