"""PyTorch eager baseline for torch2triton/attention_decode_gqa (Hugging Face eager style).

The kv heads are repeated to the query heads; the scores are computed in float32 (peaked
decode logits need more than bf16's 8 bits), the softmax weights rounded to bf16 for p @ v.
"""

import torch


def attention_decode_gqa(q, k_cache, v_cache, seq_lens):
    _, Hq, D = q.shape
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hkv
    k = k_cache.repeat_interleave(G, dim=1)  # [B, Hq, S, D]
    v = v_cache.repeat_interleave(G, dim=1)
    scores = torch.matmul(q.unsqueeze(2).float(), k.float().transpose(-1, -2)) * D ** -0.5
    masked = torch.arange(S, device=q.device)[None, :] >= seq_lens[:, None]  # [B, S]
    scores = scores.masked_fill(masked[:, None, None, :], float("-inf"))  # [B, Hq, 1, S]
    p = torch.softmax(scores, dim=-1).to(q.dtype)
    return torch.matmul(p, v).squeeze(2)
