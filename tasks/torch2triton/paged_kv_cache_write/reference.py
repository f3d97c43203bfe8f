"""Reference for torch2triton/paged_kv_cache_write: the caches with the new tokens' slots written."""

import torch


def _write(cache: torch.Tensor, new: torch.Tensor, slot_mapping: torch.Tensor) -> torch.Tensor:
    NB, BS, H, D = cache.shape
    out = cache.to(torch.float32).reshape(NB * BS, H, D).clone()
    valid = slot_mapping >= 0
    out[slot_mapping[valid]] = new[valid].to(torch.float32)
    return out.view(NB, BS, H, D)


def paged_kv_cache_write_reference(key, value, key_cache, value_cache, slot_mapping):
    return _write(key_cache, key, slot_mapping), _write(value_cache, value, slot_mapping)
