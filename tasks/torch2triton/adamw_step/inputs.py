"""Inputs for torch2triton/adamw_step: a flat float32 parameter buffer mid-training.

Gradients have a scale that varies over the buffer (log-uniform 1e-4 to 3e-3 per 1024-element
stretch, like the tensors of a model laid end to end); the moments are consistent with it
(m about 0.5 g-scale, v about the squared g-scale, strictly positive)."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    N = int(case["N"])
    g_ = torch.Generator(device=device).manual_seed(seed)
    n_chunks = (N + 1023) // 1024
    chunk_scale = torch.pow(10.0, -4.0 + 1.5 * torch.rand((n_chunks,), generator=g_, device=device))
    scale = chunk_scale.repeat_interleave(1024)[:N]
    p = 0.02 * torch.randn((N,), generator=g_, device=device, dtype=torch.float32)
    g = scale * torch.randn((N,), generator=g_, device=device, dtype=torch.float32)
    m = 0.5 * scale * torch.randn((N,), generator=g_, device=device, dtype=torch.float32)
    v = scale * scale * (0.25 + torch.rand((N,), generator=g_, device=device, dtype=torch.float32))
    return {
        "p": p,
        "g": g,
        "m": m,
        "v": v,
        "lr": float(case["lr"]),
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "weight_decay": 0.1,
        "step": int(case["step"]),
    }
