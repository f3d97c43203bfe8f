"""Input factory for triton2triton/embedding_gather."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    V, D, N = int(case["V"]), int(case["D"]), int(case["N"])
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    id_dtype = getattr(torch, case.get("id_dtype", "int64"))
    g = torch.Generator(device=device).manual_seed(seed)
    # An embedding table at its usual initial scale; token ids anywhere in the vocabulary.
    table = (torch.randn(V, D, generator=g, device=device, dtype=torch.float32) * 0.02).to(dtype)
    ids = torch.randint(0, V, (N,), generator=g, device=device, dtype=torch.int64).to(id_dtype)
    return {"ids": ids, "table": table}
