"""Inputs for torch2triton/moe_grouped_gemm: tokens sorted by expert, uneven expert loads."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, K, N, E = int(case["T"]), int(case["K"]), int(case["N"]), int(case["E"])
    g = torch.Generator(device=device).manual_seed(seed)
    # Router load: log-normal expert popularity (a few hot experts, a long tail) with
    # max(1, E // 8) experts (never all) receiving no token; counts drawn for T routed rows.
    popularity = torch.exp(0.8 * torch.randn((E,), generator=g, device=device))
    empty = torch.randperm(E, generator=g, device=device)[: min(max(1, E // 8), E - 1)]
    popularity[empty] = 0.0
    choice = torch.multinomial(popularity, T, replacement=True, generator=g)
    counts = torch.bincount(choice, minlength=E)
    expert_offsets = torch.zeros((E + 1,), device=device, dtype=torch.int64)
    expert_offsets[1:] = torch.cumsum(counts, dim=0)
    x = torch.randn((T, K), generator=g, device=device, dtype=torch.float32)
    w = torch.randn((E, N, K), generator=g, device=device, dtype=torch.float32) * K**-0.5
    return {"x": x.to(dtype), "expert_offsets": expert_offsets, "w": w.to(dtype)}
