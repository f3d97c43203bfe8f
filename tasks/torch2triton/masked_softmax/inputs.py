"""Inputs for torch2triton/masked_softmax: attention-score-like rows, roughly N(0, 2^2) plus
a per-row offset, and a boolean mask (True = masked out) combining key padding with scattered
masked positions. Every row keeps at least one unmasked position."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    N, D = int(case["N"]), int(case["D"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((N, D), generator=g, device=device, dtype=torch.float32)
    x.mul_(2.0).add_(3.0 * torch.randn((N, 1), generator=g, device=device))
    # key padding: each row's valid length is drawn from [D / 4, D]; about 10% of the
    # positions inside it are masked as well (scattered, as a document or sparsity mask)
    cols = torch.arange(D, device=device).view(1, D)
    length = torch.randint(max(1, D // 4), D + 1, (N, 1), generator=g, device=device)
    mask = (cols >= length) | (torch.rand((N, D), generator=g, device=device) < 0.1)
    # one position inside the valid length always stays unmasked
    keep = (torch.rand((N, 1), generator=g, device=device) * length).long().clamp(max=D - 1)
    mask.scatter_(1, keep, False)
    return {"x": x.to(dtype), "mask": mask}
