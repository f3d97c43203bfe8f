"""Inputs for torch2cuda/rope_gptj: query/key heads and the rotary tables of random positions."""

import torch

HEAD_DIM = 128


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    T, Hq, Hk = int(case["T"]), int(case["Hq"]), int(case["Hk"])
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn((T, Hq, HEAD_DIM), generator=g, device=device, dtype=torch.float32)
    k = torch.randn((T, Hk, HEAD_DIM), generator=g, device=device, dtype=torch.float32)
    k.mul_(2.0)
    # Tokens of several sequences at mixed positions; base-10000 frequencies as in GPT-J.
    pos = torch.randint(0, 8192, (T,), generator=g, device=device).double()
    inv_freq = 10000.0 ** (-torch.arange(0, HEAD_DIM, 2, device=device, dtype=torch.float64) / HEAD_DIM)
    angles = pos[:, None] * inv_freq[None, :]
    return {
        "q": q.to(dtype),
        "k": k.to(dtype),
        "cos": torch.cos(angles).float(),
        "sin": torch.sin(angles).float(),
    }
