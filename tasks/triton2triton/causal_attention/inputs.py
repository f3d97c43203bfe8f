"""Input factory for triton2triton/causal_attention."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    B, H, S, D = (int(case[k]) for k in ("B", "H", "S", "D"))
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # Unit-variance q, k, v: with the 1/sqrt(D) scale the attention logits are about N(0, 1).
    q, k, v = (
        torch.randn(B, H, S, D, generator=g, device=device, dtype=torch.float32).to(dtype)
        for _ in range(3)
    )
    return {"q": q, "k": k, "v": v}
