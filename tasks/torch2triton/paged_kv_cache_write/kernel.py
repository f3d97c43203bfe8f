"""Paged KV-cache write (vLLM's reshape_and_cache) in Triton: to be written."""

import torch


def paged_kv_cache_write(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                         value_cache: torch.Tensor, slot_mapping: torch.Tensor):
    """Return (new_key_cache, new_value_cache): copies of the caches with the new tokens written.

    key, value: [T, H, D] bf16; key_cache, value_cache: [NB, BS, H, D] bf16; slot_mapping:
    [T] int64, distinct slots s = block * BS + offset, or -1 (token not written). Token t goes
    to new_key_cache[s // BS, s % BS] = key[t] (and likewise for value).
    """
    raise NotImplementedError("implement paged_kv_cache_write with a Triton kernel")
