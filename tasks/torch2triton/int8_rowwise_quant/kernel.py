"""Per-row symmetric int8 quantisation in Triton. To be written."""

import torch


def int8_rowwise_quant(x: torch.Tensor):
    """Quantise each row of x (bf16 [N, D]) to int8 with its own float32 scale.

    Returns (q, scale): q int8 [N, D], scale float32 [N], where
    scale[i] = amax(|x[i, :]|) / 127 (1.0 for an all-zero row) and
    q[i, j] = clamp(round_half_to_even(x[i, j] / scale[i]), -127, 127).
    """
    raise NotImplementedError("write a Triton kernel for per-row int8 quantisation")
