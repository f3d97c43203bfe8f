"""Reference for torch2triton/attention_decode_gqa: masked single-query attention in float32."""

import torch


def attention_decode_gqa_reference(q, k_cache, v_cache, seq_lens):
    B, Hq, D = q.shape
    Hkv, S = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hkv
    qf = q.float().view(B, Hkv, G, D)
    scores = torch.einsum("bhgd,bhsd->bhgs", qf, k_cache.float()) * D ** -0.5
    masked = torch.arange(S, device=q.device)[None, :] >= seq_lens.long()[:, None]  # [B, S]
    scores = scores.masked_fill(masked[:, None, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhgs,bhsd->bhgd", p, v_cache.float())
    return out.reshape(B, Hq, D)
