"""Reference for torch2triton/mask_compact: stream compaction with boolean indexing."""

import torch


def mask_compact_reference(mask: torch.Tensor, values: torch.Tensor):
    N = mask.numel()
    idx = torch.arange(N, device=mask.device, dtype=torch.int64)[mask]
    count = idx.numel()
    out_values = torch.zeros((N,), device=values.device, dtype=torch.float64)
    out_values[:count] = values.double()[idx]
    out_idx = torch.full((N,), -1, device=mask.device, dtype=torch.int64)
    out_idx[:count] = idx
    return out_values, torch.tensor(count, device=mask.device, dtype=torch.int64), out_idx
