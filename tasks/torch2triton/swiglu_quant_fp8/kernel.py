"""SwiGLU (silu(a) * b) with per-token dynamic fp8 (e4m3) quantisation in Triton: to be written."""

import torch


def swiglu_quant_fp8(x: torch.Tensor):
    """Quantise y = silu(a) * b row by row, where x = [a | b] is bf16 [T, 2H].

    Returns (q, scale): q float8_e4m3fn [T, H], scale float32 [T], where
    scale = max(amax(|y[t, :]|) / 448, 1e-12) and q = round_to_e4m3(clamp(y / scale, -448, 448)).
    """
    raise NotImplementedError("implement swiglu_quant_fp8 with a Triton kernel")
