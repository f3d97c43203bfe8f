"""Inputs for torch2triton/kl_div_rows: teacher logits and a student that disagrees with them.

Teacher logits have a spread of about 2 per logit plus a per-row offset (logits are not
centred); the student is the teacher plus independent noise of a per-row size (0.5 to 2) and
its own offset, so per-row KL values range from about 0.01 to a few nats."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    B, V = int(case["B"]), int(case["V"])
    g = torch.Generator(device=device).manual_seed(seed)
    t = torch.randn((B, V), generator=g, device=device, dtype=torch.float32)
    t.mul_(2.0).add_(4.0 * torch.randn((B, 1), generator=g, device=device))
    noise = 0.5 + 1.5 * torch.rand((B, 1), generator=g, device=device)
    s = t + noise * torch.randn((B, V), generator=g, device=device, dtype=torch.float32)
    s.add_(4.0 * torch.randn((B, 1), generator=g, device=device))
    return {"s": s.to(dtype), "t": t.to(dtype), "temperature": float(case["temperature"])}
