"""PyTorch eager baseline for torch2triton/mask_compact (nonzero syncs with the host)."""

import torch


def mask_compact(mask: torch.Tensor, values: torch.Tensor):
    N = mask.numel()
    idx = torch.nonzero(mask).squeeze(1)
    count = idx.numel()
    out_values = torch.zeros_like(values)
    out_values[:count] = values[idx]
    out_idx = torch.full((N,), -1, device=mask.device, dtype=torch.int64)
    out_idx[:count] = idx
    return out_values, torch.tensor(count, device=mask.device, dtype=torch.int64), out_idx
