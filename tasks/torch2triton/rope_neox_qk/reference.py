"""Reference for torch2triton/rope_neox_qk: GPT-NeoX rotary embedding (rotate halves) in float32."""

import torch


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x = x.to(torch.float32)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rope_neox_qk_reference(q, k, cos, sin):
    c = cos.to(torch.float32)[:, None, :]  # [T, 1, Dh/2]
    s = sin.to(torch.float32)[:, None, :]
    return _rope(q, c, s), _rope(k, c, s)
