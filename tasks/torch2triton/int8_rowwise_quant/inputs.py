"""Inputs for torch2triton/int8_rowwise_quant: LLM-like activations, with some all-zero rows."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    N, D = int(case["N"]), int(case["D"])
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # Gaussian activations, per-token magnitudes spread over ~e^{+-1}, and a few outlier
    # channels (about 1 in 200) twenty times larger, as in LLM hidden states: the outliers set
    # most rows' amax, so ordinary values land in the low tens of the int8 range.
    row_scale = torch.exp(0.5 * torch.randn(N, 1, generator=g, device=device))
    outlier = torch.rand(1, D, generator=g, device=device) < 0.005
    col_scale = torch.where(outlier, 20.0, 1.0)
    x = torch.randn(N, D, generator=g, device=device) * row_scale * col_scale
    # Padding tokens: about 1% of the rows, and always the middle row, are all zero (their
    # scale must be 1.0 and their q all zero).
    padding = torch.rand(N, 1, generator=g, device=device) < 0.01
    padding[N // 2] = True
    x = torch.where(padding, 0.0, x)
    return {"x": x.to(dtype)}
