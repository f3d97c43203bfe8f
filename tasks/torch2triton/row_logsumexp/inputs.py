"""Inputs for torch2triton/row_logsumexp: score rows (logits) with per-row offsets, a few of
them large enough that an unshifted exp overflows or underflows in float32."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, D = int(case["N"]), int(case["D"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, D), generator=g, device=device, dtype=torch.float32)
    # spread of about 2 per score plus a per-row offset (scores are not centred)
    offset = 4.0 * torch.randn((N, 1), generator=g, device=device)
    # about one row in eight is shifted by +-100: exp(x) without subtracting the row's
    # maximum overflows (or underflows to zero) there
    shifted = torch.rand((N, 1), generator=g, device=device) < 0.125
    sign = torch.where(torch.rand((N, 1), generator=g, device=device) < 0.5, -1.0, 1.0)
    offset = offset + torch.where(shifted, 100.0 * sign, 0.0)
    x.mul_(2.0).add_(offset)
    return {"x": x.to(dtype)}
