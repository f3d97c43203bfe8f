"""Inputs for torch2triton/grad_norm_clip: a flat float32 gradient buffer that needs clipping.

The gradient's scale varies over the buffer (log-uniform over two decades per 1024-element
stretch, like a model's tensors laid end to end); the whole buffer is rescaled to a total
L2 norm between 2 and 5, above every max_norm used, so clipping always applies (with a
coefficient between about 0.1 and 0.5)."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    N = int(case["N"])
    gen = torch.Generator(device=device).manual_seed(seed)
    n_chunks = (N + 1023) // 1024
    chunk_scale = torch.pow(10.0, -1.0 + 2.0 * torch.rand((n_chunks,), generator=gen, device=device))
    g = torch.randn((N,), generator=gen, device=device, dtype=torch.float32)
    g.mul_(chunk_scale.repeat_interleave(1024)[:N])
    target = 2.0 + 3.0 * torch.rand((), generator=gen, device=device)
    g.mul_(target / torch.linalg.vector_norm(g.double()).float())
    return {"g": g, "max_norm": float(case["max_norm"])}
