"""Paged KV-cache write in Triton: each slot of both new caches written once from its source.

A tiny first pass inverts the slot mapping into a per-slot token index (-1: the slot keeps
its old row); it touches 4 bytes per slot and 8 per token. The main kernel then walks the
slots: one program per slot builds that slot's row of the new key cache and of the new value
cache, loading it either from the old cache or from the new token (the other load is masked
off, so no memory is read for it). Every slot is read once from its only source and written
once, the minimum traffic; the eager clone + index_put writes the overwritten slots twice and
copies the new tokens' rows through a gathered temporary.
"""

import torch
import triton
import triton.language as tl

_MAX_ROW_BLOCK = 2048


@triton.jit
def _clear_slots_kernel(inv_ptr, num_slots, BLOCK: tl.constexpr):
    # Every slot starts as "keeps its old row"; _fill_slots_kernel (the next launch) then
    # marks the written ones.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(inv_ptr + offs, tl.full([BLOCK], -1, dtype=tl.int32), mask=offs < num_slots)


@triton.jit
def _fill_slots_kernel(slot_ptr, inv_ptr, T, BLOCK: tl.constexpr):
    t = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    t_mask = t < T
    slot = tl.load(slot_ptr + t, mask=t_mask, other=-1)
    tl.store(inv_ptr + slot, t.to(tl.int32), mask=t_mask & (slot >= 0))


@triton.jit
def _write_caches_kernel(key_ptr, value_ptr, kc_ptr, vc_ptr, out_k_ptr, out_v_ptr, inv_ptr,
                         ROW, ROW_BLOCK: tl.constexpr):
    slot = tl.program_id(0).to(tl.int64)
    t = tl.load(inv_ptr + slot).to(tl.int64)
    is_new = t >= 0
    cache_off = slot * ROW
    new_off = t * ROW
    for c0 in range(0, ROW, ROW_BLOCK):
        cols = c0 + tl.arange(0, ROW_BLOCK)
        mask = cols < ROW
        k_new = tl.load(key_ptr + new_off + cols, mask=mask & is_new, other=0.0)
        k_old = tl.load(kc_ptr + cache_off + cols, mask=mask & ~is_new, other=0.0)
        tl.store(out_k_ptr + cache_off + cols, tl.where(is_new, k_new, k_old), mask=mask)
        v_new = tl.load(value_ptr + new_off + cols, mask=mask & is_new, other=0.0)
        v_old = tl.load(vc_ptr + cache_off + cols, mask=mask & ~is_new, other=0.0)
        tl.store(out_v_ptr + cache_off + cols, tl.where(is_new, v_new, v_old), mask=mask)


def paged_kv_cache_write(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                         value_cache: torch.Tensor, slot_mapping: torch.Tensor):
    """Return (new_key_cache, new_value_cache): copies of the caches with the new tokens written.

    key, value: [T, H, D] bf16; key_cache, value_cache: [NB, BS, H, D] bf16; slot_mapping:
    [T] int64, distinct slots s = block * BS + offset, or -1 (token not written). Token t goes
    to new_key_cache[s // BS, s % BS] = key[t] (and likewise for value).
    """
    key, value = key.contiguous(), value.contiguous()
    key_cache, value_cache = key_cache.contiguous(), value_cache.contiguous()
    slot_mapping = slot_mapping.contiguous()
    NB, BS, H, D = key_cache.shape
    T = key.shape[0]
    num_slots, row = NB * BS, H * D
    out_k = torch.empty_like(key_cache)
    out_v = torch.empty_like(value_cache)
    if num_slots == 0 or row == 0:
        return out_k, out_v
    inv = torch.empty((num_slots,), device=key_cache.device, dtype=torch.int32)
    _clear_slots_kernel[(triton.cdiv(num_slots, 1024),)](inv, num_slots, BLOCK=1024, num_warps=4)
    if T > 0:
        _fill_slots_kernel[(triton.cdiv(T, 1024),)](slot_mapping, inv, T, BLOCK=1024,
                                                    num_warps=4)
    row_block = min(triton.next_power_of_2(row), _MAX_ROW_BLOCK)
    num_warps = max(1, min(8, row_block // 256))  # 8 bf16 (16 bytes) per thread
    _write_caches_kernel[(num_slots,)](key, value, key_cache, value_cache, out_k, out_v, inv,
                                       row, ROW_BLOCK=row_block, num_warps=num_warps)
    return out_k, out_v
