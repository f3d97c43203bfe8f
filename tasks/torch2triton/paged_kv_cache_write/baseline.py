"""PyTorch eager baseline for torch2triton/paged_kv_cache_write: clone, then a masked index_put."""


def paged_kv_cache_write(key, value, key_cache, value_cache, slot_mapping):
    NB, BS, H, D = key_cache.shape
    new_key_cache = key_cache.clone()
    new_value_cache = value_cache.clone()
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    new_key_cache.view(NB * BS, H, D).index_put_((slots,), key[valid])
    new_value_cache.view(NB * BS, H, D).index_put_((slots,), value[valid])
    return new_key_cache, new_value_cache
