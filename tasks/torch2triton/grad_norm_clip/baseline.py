"""PyTorch eager baseline for torch2triton/grad_norm_clip (torch.nn.utils.clip_grad_norm_'s math)."""

import torch


def grad_norm_clip(g: torch.Tensor, max_norm: float):
    norm = torch.linalg.vector_norm(g)
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    return g * coef, norm
