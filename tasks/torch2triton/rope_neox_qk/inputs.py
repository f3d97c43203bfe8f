"""Inputs for torch2triton/rope_neox_qk: q and k of a packed batch and their per-token cos/sin."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    T, Hq, Hk, Dh = (int(case[k]) for k in ("T", "Hq", "Hk", "Dh"))
    base = float(case.get("base", 10000.0))
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # A packed batch of sequences (1 to 4096 tokens each), each continuing from a random
    # offset (chunked prefill): positions count up within a sequence and restart at the next.
    lengths = torch.randint(1, 4097, (T,), generator=g, device=device)
    ends = torch.cumsum(lengths, 0)
    count = int((ends < T).sum()) + 1
    starts = torch.cat((torch.zeros(1, device=device, dtype=ends.dtype), ends[:count - 1]))
    seq = torch.searchsorted(ends[:count], torch.arange(T, device=device), right=True)
    offset = torch.randint(0, 8192, (count,), generator=g, device=device)
    positions = torch.arange(T, device=device) - starts[seq] + offset[seq]
    # Standard RoPE angles, angle[t, i] = positions[t] * base^(-2i/Dh), i < Dh/2, in float64.
    inv_freq = base ** (-torch.arange(0, Dh, 2, device=device, dtype=torch.float64) / Dh)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    q = torch.randn(T, Hq, Dh, generator=g, device=device, dtype=torch.float32).to(dtype)
    k = torch.randn(T, Hk, Dh, generator=g, device=device, dtype=torch.float32).to(dtype)
    return {"q": q, "k": k,
            "cos": torch.cos(angles).to(torch.float32).contiguous(),
            "sin": torch.sin(angles).to(torch.float32).contiguous()}
