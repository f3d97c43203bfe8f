"""rope_gptj in CUDA: to be written (see the task's instructions)."""

import torch


def rope_gptj(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Return (q', k'): q [T, Hq, 128] and k [T, Hk, 128] (bfloat16) with the pairs (2i, 2i+1)
    rotated by the angle whose cos/sin are cos[t, i], sin[t, i] (float32 [T, 64])."""
    raise NotImplementedError("implement rope_gptj with a CUDA kernel in kernel.cu")
