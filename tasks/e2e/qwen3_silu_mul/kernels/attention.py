"""Attention and the KV-cache write (baseline: eager PyTorch, like a model's "eager" attention).

attention_prefill(q[T,Hq,D], k[T,Hk,D], v[T,Hk,D], scale) -> [T,Hq,D]   causal, one sequence
attention_decode(q[B,Hq,D], k_cache[B,L,Hk,D], v_cache[B,L,Hk,D], seq_lens[B] int32, scale)
    -> [B,Hq,D]   each query attends to the positions < its seq_len (the mask is built on the
    device over the whole cache length: no host sync, so a CUDA graph can capture it)
kv_write(k[T,Hk,D], v[T,Hk,D], k_cache[S,L,Hk,D], v_cache[S,L,Hk,D], slots[T], positions[T])
    -> None   k_cache[slots, positions] = k, v_cache[slots, positions] = v
"""

import torch


def attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      scale: float) -> torch.Tensor:
    t, hq, _ = q.shape
    groups = hq // k.shape[1]
    query = q.transpose(0, 1)                                        # [Hq, T, D]
    key = k.repeat_interleave(groups, dim=1).transpose(0, 1)         # [Hq, T, D]
    value = v.repeat_interleave(groups, dim=1).transpose(0, 1)
    scores = torch.matmul(query, key.transpose(1, 2)) * scale       # [Hq, T, T]
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, value).transpose(0, 1).contiguous()  # [T, Hq, D]


def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    b, hq, d = q.shape
    length, hk = k_cache.shape[1], k_cache.shape[2]
    query = q.view(b, hk, hq // hk, d)                               # [B, Hk, g, D]
    key = k_cache.permute(0, 2, 3, 1)                                # [B, Hk, D, L]
    value = v_cache.transpose(1, 2)                                  # [B, Hk, L, D]
    scores = torch.matmul(query, key) * scale                        # [B, Hk, g, L]
    beyond = torch.arange(length, device=q.device)[None, :] >= seq_lens[:, None]
    scores = scores.masked_fill(beyond[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, value).reshape(b, hq, d)


def kv_write(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             slots: torch.Tensor, positions: torch.Tensor) -> None:
    k_cache[slots, positions] = k
    v_cache[slots, positions] = v
