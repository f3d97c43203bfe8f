"""Reference for triton2triton/causal_attention: softmax(q k^T / sqrt(D) + causal mask) v.

Computed in float64 (immune to TF32 settings), one batch entry and one block of query rows
at a time so that the score matrix stays small; key columns past the block's last row are
fully masked and skipped."""

import torch

_ROWS = 1024


def causal_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    B, H, S, D = q.shape
    scale = D**-0.5
    out = torch.empty((B, H, S, D), dtype=torch.float64, device=q.device)
    for b in range(B):
        qb, kb, vb = (t[b].to(torch.float64) for t in (q, k, v))
        for i0 in range(0, S, _ROWS):
            i1 = min(S, i0 + _ROWS)
            s = (qb[:, i0:i1] @ kb[:, :i1].transpose(-1, -2)) * scale  # [H, rows, i1]
            rows = torch.arange(i0, i1, device=q.device)[:, None]
            cols = torch.arange(i1, device=q.device)[None, :]
            s.masked_fill_(cols > rows, float("-inf"))
            out[b, :, i0:i1] = torch.softmax(s, dim=-1) @ vb[:, :i1]
    return out
