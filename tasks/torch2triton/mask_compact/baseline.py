"""PyTorch eager baseline for torch2triton/mask_compact: positions from a cumulative sum of the
mask, then index_copy into outputs one element longer (the unselected elements land on that
spare element, which is cut off).

No call here waits for the GPU (torch.nonzero or boolean indexing would: they ask the GPU how many
elements are selected), so a block of calls can be queued and timed as one."""

import torch


def mask_compact(mask: torch.Tensor, values: torch.Tensor):
    N = mask.numel()
    selected = mask.to(torch.int64)
    count = selected.sum()
    dest = torch.where(mask, torch.cumsum(selected, 0) - 1, N)
    out_values = torch.zeros(N + 1, dtype=values.dtype, device=values.device)
    out_values.index_copy_(0, dest, values)
    out_idx = torch.full((N + 1,), -1, dtype=torch.int64, device=mask.device)
    out_idx.index_copy_(0, dest, torch.arange(N, device=mask.device))
    # the spare element got whatever came last; the visible part is exact
    return out_values[:N], count, out_idx[:N]
