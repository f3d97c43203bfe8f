"""PyTorch eager baseline for torch2triton/int4_weight_gemm: dequantise all of W, then F.linear."""

import torch
import torch.nn.functional as F


def int4_weight_gemm(x: torch.Tensor, w_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    N, K = w_packed.shape[0], 2 * w_packed.shape[1]
    group = K // scales.shape[1]
    # Unpack two int4 per byte (low nibble first) and sign-extend.
    w = torch.stack((w_packed & 0x0F, w_packed >> 4), dim=-1).reshape(N, K).to(torch.int8)
    w = torch.where(w >= 8, w - 16, w)
    w = (w.to(x.dtype).view(N, K // group, group) * scales.unsqueeze(-1)).reshape(N, K)
    return F.linear(x, w)
