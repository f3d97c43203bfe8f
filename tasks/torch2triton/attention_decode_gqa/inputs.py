"""Inputs for torch2triton/attention_decode_gqa: one decode step over a batch of KV caches."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    B, Hkv, G, S, D = (int(case[k]) for k in ("B", "Hkv", "G", "S", "D"))
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # Sequence lengths between ceil(S/2) and S (the cache holds S_max = S positions); the
    # first sequence fills the cache. Positions at and past a sequence's length hold stale
    # values that must be ignored.
    seq_lens = torch.randint((S + 1) // 2, S + 1, (B,), generator=g, device=device,
                             dtype=torch.int32)
    seq_lens[0] = S
    # Keys with uneven channel magnitudes (a few large channels, as after RoPE in real
    # models) and queries scaled so that the scores spread over a few units: the softmax is
    # peaked on some positions but averages over many.
    chan = torch.exp(0.5 * torch.randn(D, generator=g, device=device))
    q = 1.5 * torch.randn(B, Hkv * G, D, generator=g, device=device)
    k = torch.randn(B, Hkv, S, D, generator=g, device=device) * chan
    v = torch.randn(B, Hkv, S, D, generator=g, device=device)
    return {"q": q.to(dtype), "k_cache": k.to(dtype), "v_cache": v.to(dtype),
            "seq_lens": seq_lens}
