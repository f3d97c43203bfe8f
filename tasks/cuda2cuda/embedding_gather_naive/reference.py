"""Reference for cuda2cuda/embedding_gather_naive: the gathered rows, an exact copy."""

import torch


def embedding_gather_reference(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return table[idx.long()].float()
