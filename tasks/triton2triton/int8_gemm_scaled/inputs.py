"""Inputs for triton2triton/int8_gemm_scaled: symmetric int8 quantized activations and weights
with per-row / per-channel fp32 scales, scaled so that outputs are of about unit size."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    M, N, K = int(case["M"]), int(case["N"]), int(case["K"])
    g = torch.Generator(device=device).manual_seed(seed)

    def quantized(rows: int) -> torch.Tensor:
        # Roughly Gaussian codes (std ~40) clipped to the symmetric int8 range, as from absmax
        # quantization of activations or weights.
        codes = torch.randn((rows, K), generator=g, device=device, dtype=torch.float32) * 40.0
        return codes.round_().clamp_(-127, 127).to(torch.int8)

    x_q = quantized(M)
    w_q = quantized(N)
    # Scales vary by row and by channel (0.5x to 1.5x), so a swapped or missing scale is seen.
    x_scale = (0.5 + torch.rand((M,), generator=g, device=device, dtype=torch.float32)) / 40.0
    w_scale = (0.5 + torch.rand((N,), generator=g, device=device, dtype=torch.float32)) / (
        40.0 * K**0.5)
    return {"x_q": x_q, "w_q": w_q, "x_scale": x_scale, "w_scale": w_scale}
