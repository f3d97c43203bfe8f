"""PyTorch eager baseline for torch2triton/paged_kv_cache_write: clone each cache (one row more,
which the skipped tokens are written to), then an index_copy of every token's row.

No call here waits for the GPU (a boolean mask of the valid tokens would: indexing by it asks the
GPU how many there are), so a block of calls can be queued and timed as one."""

import torch


def _write(cache: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    NB, BS, H, D = cache.shape
    extended = torch.empty((NB * BS + 1, H, D), dtype=cache.dtype, device=cache.device)
    extended[: NB * BS].copy_(cache.view(NB * BS, H, D))
    extended.index_copy_(0, slots, rows)  # several skipped tokens may land on the spare row
    return extended[: NB * BS].view(NB, BS, H, D)


def paged_kv_cache_write(key, value, key_cache, value_cache, slot_mapping):
    NB, BS = key_cache.shape[:2]
    slots = torch.where(slot_mapping >= 0, slot_mapping, NB * BS)
    return _write(key_cache, key, slots), _write(value_cache, value, slots)
