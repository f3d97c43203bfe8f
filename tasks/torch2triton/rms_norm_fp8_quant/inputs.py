"""Inputs for torch2triton/rms_norm_fp8_quant: LLM hidden states and an RMSNorm weight."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    M, N = int(case["M"]), int(case["N"])
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # Residual-stream activations: Gaussian, per-token magnitudes spread over ~e^{+-1}, and a
    # few outlier channels (about 1 in 200) twenty times larger, as seen in LLM hidden states.
    # The norm removes the token's magnitude; the outliers still set the row's amax, so
    # ordinary values land low in the fp8 range and the smallest ones in its subnormals.
    row_scale = torch.exp(0.5 * torch.randn(M, 1, generator=g, device=device))
    outlier = torch.rand(1, N, generator=g, device=device) < 0.005
    col_scale = torch.where(outlier, 20.0, 1.0)
    x = torch.randn(M, N, generator=g, device=device) * row_scale * col_scale
    weight = torch.exp(0.3 * torch.randn(N, generator=g, device=device))
    return {"x": x.to(dtype), "weight": weight.to(dtype), "eps": float(case.get("eps", 1e-6))}
