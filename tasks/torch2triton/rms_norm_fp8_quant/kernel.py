"""Fused RMSNorm + per-token dynamic fp8 (e4m3) quantisation in Triton: to be written."""

import torch


def rms_norm_fp8_quant(x: torch.Tensor, weight: torch.Tensor, eps: float):
    """RMSNorm each row of x (bf16 [M, N], weight bf16 [N]), then quantise it to fp8 e4m3.

    Returns (q, scale): q float8_e4m3fn [M, N], scale float32 [M, 1], where, in float32,
    y = x / sqrt(mean(x**2) + eps) * weight, scale = max(amax(|y|) / 448, 1e-12) and
    q = round_to_e4m3(clamp(y / scale, -448, 448)).
    """
    raise NotImplementedError("implement rms_norm_fp8_quant with a Triton kernel")
