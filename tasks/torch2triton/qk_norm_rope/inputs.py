"""Inputs for torch2triton/qk_norm_rope: Qwen3-style q and k projections, norm weights, cos/sin."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    T, Hq, Hk, D = (int(case[k]) for k in ("T", "Hq", "Hk", "D"))
    base = float(case.get("base", 1000000.0))
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
    # RoPE angles, angle[t, i] = positions[t] * base^(-2i/D), i < D/2, in float64.
    inv_freq = base ** (-torch.arange(0, D, 2, device=device, dtype=torch.float64) / D)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]

    # Projections whose rows (token, head) differ in scale (which the norm removes) and whose
    # channels differ in scale (which it keeps); per-channel norm weights around 1.
    def proj(H):
        row = torch.exp(0.7 * torch.randn(T, H, 1, generator=g, device=device))
        chan = torch.exp(0.4 * torch.randn(H, D, generator=g, device=device))
        return (torch.randn(T, H, D, generator=g, device=device) * row * chan).to(dtype)

    q, k = proj(Hq), proj(Hk)
    q_weight = torch.exp(0.3 * torch.randn(D, generator=g, device=device)).to(dtype)
    k_weight = torch.exp(0.3 * torch.randn(D, generator=g, device=device)).to(dtype)
    return {"q": q, "k": k, "q_weight": q_weight, "k_weight": k_weight,
            "cos": torch.cos(angles).to(torch.float32).contiguous(),
            "sin": torch.sin(angles).to(torch.float32).contiguous(),
            "eps": float(case.get("eps", 1e-6))}
