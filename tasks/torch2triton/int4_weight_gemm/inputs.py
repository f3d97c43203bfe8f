"""Inputs for torch2triton/int4_weight_gemm: decode activations and group-quantised int4 weights."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    dtype = getattr(torch, case.get("dtype", "bfloat16"))
    M, N, K, G = int(case["M"]), int(case["N"]), int(case["K"]), int(case["G"])
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, K), generator=g, device=device, dtype=torch.float32)
    # Float weights of about N(0, 1/K), with per-row magnitudes varying by ~2x, quantised
    # symmetrically per group of G: scale = absmax / 7.5, q = clamp(round(w / scale), -8, 7).
    w = torch.randn((N, K), generator=g, device=device, dtype=torch.float32) * K**-0.5
    w.mul_(0.7 + 0.6 * torch.rand((N, 1), generator=g, device=device, dtype=torch.float32))
    wg = w.view(N, K // G, G)
    scales = (wg.abs().amax(dim=-1) / 7.5).to(dtype)
    q = torch.clamp(torch.round(wg / scales.float().unsqueeze(-1)), -8, 7).to(torch.int32)
    q = (q.reshape(N, K) & 0x0F).view(N, K // 2, 2)
    w_packed = (q[..., 0] | (q[..., 1] << 4)).to(torch.uint8)
    return {"x": x.to(dtype), "w_packed": w_packed, "scales": scales}
