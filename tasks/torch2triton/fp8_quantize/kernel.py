"""Per-token dynamic fp8 (e4m3) quantisation in Triton. To be written."""

import torch
import triton  # noqa: F401
import triton.language as tl  # noqa: F401


def fp8_quantize(x: torch.Tensor):
    """Quantise each row of x (bf16 [M, N]) to float8_e4m3fn with its own scale.

    Returns (q, scale): q float8_e4m3fn [M, N], scale float32 [M, 1], where
    scale = max(amax(|x[m, :]|) / 448, 1e-12) and q = round_to_e4m3(clamp(x / scale, -448, 448)).
    """
    raise NotImplementedError("write a Triton kernel for per-row fp8 quantisation")
