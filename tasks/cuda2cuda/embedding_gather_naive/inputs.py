"""Inputs for cuda2cuda/embedding_gather_naive: a bf16 embedding table and N distinct row ids."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    V, N, D = int(case["V"]), int(case["N"]), int(case["D"])
    if N > V:
        raise ValueError(f"N ({N}) distinct rows need V >= N, got V={V}")
    g = torch.Generator(device=device).manual_seed(seed)
    table = torch.randn((V, D), generator=g, device=device, dtype=torch.float32)
    table.mul_(0.05)
    # Distinct ids in random order: every gathered row is a separate read of the table.
    idx = torch.randperm(V, generator=g, device=device)[:N].contiguous()
    return {"table": table.to(dtype), "idx": idx}
