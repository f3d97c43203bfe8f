"""Inputs for torch2triton/topk_softmax_probs: language-model next-token logits whose 16
largest values in each row are distinct even in bf16, so the top 8 and their order are
unambiguous."""

import torch

_PLANTED = 16  # more than the top 8: the 9th value is distinct from the 8th too


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, V = int(case["M"]), int(case["V"])
    g = torch.Generator(device=device).manual_seed(seed)
    # the bulk of the vocabulary: logits of spread 2, kept below 7
    logits = (2.0 * torch.randn((M, V), generator=g, device=device)).clamp_(max=7.0)
    # the likely tokens: 16 random columns per row get logits above 7.5, consecutive ones
    # 0.15-0.5 apart (at least 2 bf16 units up to 16, above 1 unit up to 32), the largest
    # about 7.5 + 16 * 0.33 = 12.8, so the top probability is typically 0.3-0.9
    cols = torch.rand((M, V), generator=g, device=device).topk(_PLANTED, dim=-1).indices
    gaps = 0.15 + 0.35 * torch.rand((M, _PLANTED), generator=g, device=device)
    logits.scatter_(1, cols, 7.5 + gaps.cumsum(dim=-1))
    # per-row offset: logits are not centred (|offset| <= 6 keeps every value below 32)
    offset = (2.0 * torch.randn((M, 1), generator=g, device=device)).clamp_(-6.0, 6.0)
    logits.add_(offset)
    return {"logits": logits.to(dtype)}
