"""Inputs for torch2triton/swiglu_quant_fp8: the fused gate/up projection output of an MLP."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    T, H = int(case["T"]), int(case["H"])
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    g = torch.Generator(device=device).manual_seed(seed)
    # x = [gate | up], both Gaussian with per-token magnitudes spread over ~e^{+-1}. About 1
    # in 200 up channels are outliers ten times larger, as in LLM MLP activations: they set a
    # row's amax, so ordinary values land low in the fp8 range and the smallest ones in its
    # subnormals.
    row_scale = torch.exp(0.5 * torch.randn(T, 1, generator=g, device=device))
    gate = 1.5 * torch.randn(T, H, generator=g, device=device) * row_scale
    outlier = torch.rand(1, H, generator=g, device=device) < 0.005
    up = torch.randn(T, H, generator=g, device=device) * row_scale * torch.where(outlier, 10.0, 1.0)
    return {"x": torch.cat((gate, up), dim=-1).to(dtype).contiguous()}
