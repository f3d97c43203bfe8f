"""Inputs for torch2triton/cross_entropy: language-model logits and next-token targets."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    B, V = int(case["B"]), int(case["V"])
    g = torch.Generator(device=device).manual_seed(seed)
    logits = torch.randn((B, V), generator=g, device=device, dtype=torch.float32)
    # spread of about 2 per logit plus a per-row offset (logits are not centred)
    logits.mul_(2.0).add_(4.0 * torch.randn((B, 1), generator=g, device=device))
    targets = torch.randint(0, V, (B,), generator=g, device=device, dtype=torch.int64)
    return {"logits": logits.to(dtype), "targets": targets}
