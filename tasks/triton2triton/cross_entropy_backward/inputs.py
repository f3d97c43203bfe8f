"""Inputs for triton2triton/cross_entropy_backward: language-model logits, next-token labels with
ignored (padding) positions, and the upstream gradient of the mean loss."""

import torch

IGNORE_INDEX = -100


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    B, V = int(case["B"]), int(case["V"])
    g = torch.Generator(device=device).manual_seed(seed)
    logits = torch.randn((B, V), generator=g, device=device, dtype=torch.float32)
    # spread of about 2 per logit plus a per-row offset (logits are not centred)
    logits.mul_(2.0).add_(4.0 * torch.randn((B, 1), generator=g, device=device))
    labels = torch.randint(0, V, (B,), generator=g, device=device, dtype=torch.int64)
    # about 10% ignored positions (padding), always including the last row, never the first
    ignored = torch.rand((B,), generator=g, device=device) < 0.1
    ignored[-1] = B > 1
    ignored[0] = False
    labels[ignored] = IGNORE_INDEX
    grad = 0.5 + 1.5 * torch.rand((), generator=g, device=device, dtype=torch.float32)
    return {"logits": logits.to(dtype), "labels": labels, "grad": grad}
