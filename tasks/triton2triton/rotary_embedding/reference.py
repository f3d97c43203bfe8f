"""Reference for triton2triton/rotary_embedding: neox-style RoPE (rotate halves) in float32."""

import torch


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x = x.to(torch.float32)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rotary_embedding_reference(positions, q, k, cos_cache, sin_cache):
    cos = cos_cache.to(torch.float32)[positions][:, None, :]  # [T, 1, D/2]
    sin = sin_cache.to(torch.float32)[positions][:, None, :]
    return _rope(q, cos, sin), _rope(k, cos, sin)
