"""Weight-only int4 GEMM (group-quantised weights) in Triton: to be written."""

import torch


def int4_weight_gemm(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Return x @ dequant(W)^T as a new [M, N] tensor in x's dtype.

    x: [M, K] bfloat16; w_packed: [N, K // 2] uint8, two signed int4 per byte (element 2j in
    the low nibble, 2j + 1 in the high nibble); scales: [N, K // G] in x's dtype, G = 128;
    dequant(W)[n, k] = int4[n, k] * scales[n, k // G].
    """
    raise NotImplementedError("write a Triton kernel that dequantises int4 tiles in registers")
