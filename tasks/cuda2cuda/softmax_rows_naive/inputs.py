"""Inputs for cuda2cuda/softmax_rows_naive: logits whose spread and offset vary from row to row."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N = int(case["M"]), int(case["N"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, N), generator=g, device=device, dtype=torch.float32)
    scale = 1.0 + 2.0 * torch.rand((M, 1), generator=g, device=device, dtype=torch.float32)
    shift = 4.0 * torch.randn((M, 1), generator=g, device=device, dtype=torch.float32)
    x.mul_(scale).add_(shift)
    return {"x": x.to(dtype)}
