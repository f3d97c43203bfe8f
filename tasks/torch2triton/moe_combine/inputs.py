"""Inputs for torch2triton/moe_combine: expert outputs grouped by expert, as after a MoE layer.

Each token picks k distinct experts of 64 (top-k of random router logits); its routing weights
are the softmax of those k logits (they sum to 1). The T * k (token, slot) pairs are sorted by
expert (stably, by token within an expert), which is the row order of the expert outputs y;
inv_perm maps each pair back to its row. Expert output rows are N(0, 1) times a per-row scale
in [0.5, 2]."""

import torch

NUM_EXPERTS = 64


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, k, D = int(case["T"]), int(case["k"]), int(case["D"])
    g = torch.Generator(device=device).manual_seed(seed)
    router = torch.randn((T, NUM_EXPERTS), generator=g, device=device, dtype=torch.float32)
    top_logits, experts = router.topk(k, dim=-1)
    weights = torch.softmax(top_logits, dim=-1)
    pairs = torch.arange(T * k, device=device, dtype=torch.int64)
    order = torch.argsort(experts.reshape(-1) * (T * k) + pairs)  # row r holds pair order[r]
    inv_perm = torch.empty_like(pairs)
    inv_perm[order] = pairs
    y = torch.randn((T * k, D), generator=g, device=device, dtype=torch.float32)
    y.mul_(0.5 + 1.5 * torch.rand((T * k, 1), generator=g, device=device))
    return {"y": y.to(dtype), "inv_perm": inv_perm, "weights": weights.contiguous()}
