"""Grouped-query decode attention over a batch of KV caches in Triton: to be written."""

import torch


def attention_decode_gqa(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         seq_lens: torch.Tensor) -> torch.Tensor:
    """Return out [B, Hq, D] bf16: softmax(q k^T / sqrt(D) over positions < seq_lens[b]) v.

    q: [B, Hq, D] bf16; k_cache, v_cache: [B, Hkv, S_max, D] bf16 with Hq = G * Hkv (query
    head h reads kv head h // G); seq_lens: [B] int32 in [1, S_max].
    """
    raise NotImplementedError("implement attention_decode_gqa with Triton kernels")
