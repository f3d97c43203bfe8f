"""Reference for triton2triton/int8_gemm_scaled, in float64."""

import torch


def int8_gemm_scaled_reference(x_q: torch.Tensor, w_q: torch.Tensor, x_scale: torch.Tensor,
                               w_scale: torch.Tensor) -> torch.Tensor:
    # int8 products summed over K <= 8192 stay below 2^27: float64 holds the int32 sum exactly.
    acc = x_q.to(torch.float64) @ w_q.to(torch.float64).t()
    return acc * x_scale.to(torch.float64)[:, None] * w_scale.to(torch.float64)[None, :]
