"""PyTorch eager baseline for torch2triton/l2_normalize_rows: F.normalize on a float32 copy
(upcast, norm, clamp, divide and downcast: one kernel per operation)."""

import torch
import torch.nn.functional as F


def l2_normalize_rows(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x.float(), p=2.0, dim=-1, eps=1e-12).to(x.dtype)
