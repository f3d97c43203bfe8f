"""Inputs for torch2triton/paged_kv_cache_write: new tokens' keys/values and a paged KV cache."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    T, H, D = int(case["T"]), int(case["H"]), int(case["D"])
    NB, BS = int(case["NB"]), int(case["BS"])
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # Distinct cache slots (block * BS + offset) in random order, as a block table scattered
    # over the cache gives; about 1 token in 20 is padding (slot -1: not written).
    slots = torch.randperm(NB * BS, generator=g, device=device)[:T]
    pad = torch.rand(T, generator=g, device=device) < 0.05
    slot_mapping = torch.where(pad, torch.full_like(slots, -1), slots).to(torch.int64)
    key = torch.randn(T, H, D, generator=g, device=device)
    value = torch.randn(T, H, D, generator=g, device=device)
    key_cache = torch.randn(NB, BS, H, D, generator=g, device=device)
    value_cache = torch.randn(NB, BS, H, D, generator=g, device=device)
    return {"key": key.to(dtype), "value": value.to(dtype), "key_cache": key_cache.to(dtype),
            "value_cache": value_cache.to(dtype), "slot_mapping": slot_mapping}
