"""PyTorch eager baseline for torch2cuda/softmax_rows: upcast, softmax, downcast (three kernels)."""

import torch


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
