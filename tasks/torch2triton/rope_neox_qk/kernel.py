"""GPT-NeoX rotary embedding of q and k in Triton: to be written."""

import torch


def rope_neox_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rotate q [T, Hq, Dh] and k [T, Hk, Dh] (bf16) by per-token angles; return (q_out, k_out).

    cos, sin: [T, Dh/2] float32. With x1 = x[..., :Dh/2], x2 = x[..., Dh/2:] and c, s the
    token's row: out = cat(x1 * c - x2 * s, x2 * c + x1 * s), computed in float32, bf16 out.
    """
    raise NotImplementedError("implement rope_neox_qk with a Triton kernel")
