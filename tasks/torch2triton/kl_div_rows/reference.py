"""Reference for torch2triton/kl_div_rows: per-row KL(softmax(t / T) || softmax(s / T)) in float64."""

import torch


def kl_div_rows_reference(s: torch.Tensor, t: torch.Tensor, temperature: float) -> torch.Tensor:
    log_q = torch.log_softmax(s.double() / temperature, dim=-1)
    log_p = torch.log_softmax(t.double() / temperature, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)
