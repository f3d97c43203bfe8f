"""Reference for triton2triton/embedding_gather: out[i] = table[ids[i]] (exact)."""

import torch


def embedding_gather_reference(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    # Gather first, then upcast: exact, and only the gathered rows are converted.
    return table[ids.to(torch.int64)].to(torch.float32)
