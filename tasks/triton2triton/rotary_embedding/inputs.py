"""Input factory for triton2triton/rotary_embedding."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    T, Hq, Hk, D = (int(case[k]) for k in ("T", "Hq", "Hk", "D"))
    max_pos = int(case.get("max_pos", 8192))
    base = float(case.get("base", 10000.0))
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # Positions of a mixed batch (prefill chunks and decode steps): arbitrary, in range.
    positions = torch.randint(0, max_pos, (T,), generator=g, device=device, dtype=torch.int64)
    q = torch.randn(T, Hq, D, generator=g, device=device, dtype=torch.float32).to(dtype)
    k = torch.randn(T, Hk, D, generator=g, device=device, dtype=torch.float32).to(dtype)
    # Standard RoPE tables: angle[p, i] = p * base^(-2i/D), i < D/2.
    inv_freq = base ** (-torch.arange(0, D, 2, device=device, dtype=torch.float64) / D)
    angles = torch.arange(max_pos, device=device, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos_cache = torch.cos(angles).to(torch.float32).contiguous()
    sin_cache = torch.sin(angles).to(torch.float32).contiguous()
    return {"positions": positions, "q": q, "k": k, "cos_cache": cos_cache, "sin_cache": sin_cache}
