"""Inputs for torch2triton/moe_router_topk: router logits with distinct values in every row."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    T, E, k = int(case["T"]), int(case["E"]), int(case["k"])
    g = torch.Generator(device=device).manual_seed(seed)
    # A random permutation of 0..E-1 per row ranks the experts; each rank, jittered by at most
    # +-0.4, is mapped through the normal quantile function. Every row therefore looks like E
    # Gaussian logits, yet logits of neighbouring rank differ by at least 0.2 / E quantiles,
    # i.e. 0.5 / E (about 2e-3 at E = 256) or more in logit, so the softmax weights of any two
    # experts differ by 0.2% or more: no ties, one valid top-k.
    rank = torch.rand((T, E), generator=g, device=device).argsort(dim=-1).to(torch.float64)
    jitter = 0.8 * (torch.rand((T, E), generator=g, device=device, dtype=torch.float64) - 0.5)
    u = (rank + 0.5 + jitter) / E
    z = torch.special.ndtri(u)
    # Per-token sharpness (logit spread 1 to 3) and offset (logits are not centred).
    spread = 1.0 + 2.0 * torch.rand((T, 1), generator=g, device=device, dtype=torch.float64)
    offset = 2.0 * torch.randn((T, 1), generator=g, device=device, dtype=torch.float64)
    logits = (z * spread + offset).to(torch.float32)
    return {"logits": logits.contiguous(), "k": k}
