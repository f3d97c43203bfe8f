"""PyTorch eager baseline for torch2triton/kl_div_rows (a distillation loss, one value per row)."""

import torch
import torch.nn.functional as F


def kl_div_rows(s: torch.Tensor, t: torch.Tensor, temperature: float) -> torch.Tensor:
    log_q = F.log_softmax(s.float() / temperature, dim=-1)
    log_p = F.log_softmax(t.float() / temperature, dim=-1)
    p = F.softmax(t.float() / temperature, dim=-1)
    return (p * (log_p - log_q)).sum(dim=-1)
