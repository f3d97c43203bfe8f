"""Inputs for triton2triton/transpose_bf16: activation-like bf16 values, all distinct enough
that a swapped or misplaced element is caught."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    # Random values plus a smooth ramp over rows and columns: neighbouring elements differ, so
    # an off-by-one in either index, or a transposed tile, changes the output.
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    rows = torch.arange(M, device=device, dtype=torch.float32)[:, None] / M
    cols = torch.arange(N, device=device, dtype=torch.float32)[None, :] / N
    x.add_(3.0 * rows - 2.0 * cols)
    return {"x": x.to(dtype)}
