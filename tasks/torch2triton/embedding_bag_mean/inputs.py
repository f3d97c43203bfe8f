"""Inputs for torch2triton/embedding_bag_mean: an embedding table and fixed-size bags of ids."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    V, D, B, L = int(case["V"]), int(case["D"]), int(case["B"]), int(case["L"])
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # nn.Embedding's default initialisation, N(0, 1), with a per-row scale of 0.5 to 2 (rows
    # trained to different norms); a bag's mean is then about N(0, 1/L), never all zeros.
    row_scale = 0.5 + 1.5 * torch.rand((V, 1), generator=g, device=device, dtype=torch.float32)
    weight = (torch.randn((V, D), generator=g, device=device, dtype=torch.float32) * row_scale)
    # Ids anywhere in the table, in random order, repeats possible (within and across bags).
    indices = torch.randint(0, V, (B, L), generator=g, device=device, dtype=torch.int64)
    return {"indices": indices, "weight": weight.to(dtype)}
