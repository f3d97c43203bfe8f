"""Reference for torch2triton/int4_weight_gemm: exact dequantisation and the GEMM in float32."""

import torch


def int4_weight_gemm_reference(x: torch.Tensor, w_packed: torch.Tensor,
                               scales: torch.Tensor) -> torch.Tensor:
    N, K = w_packed.shape[0], 2 * w_packed.shape[1]
    group = K // scales.shape[1]
    p = w_packed.to(torch.int32)
    w = torch.stack((p & 0x0F, p >> 4), dim=-1).reshape(N, K)
    w = torch.where(w >= 8, w - 16, w).float()
    # int4 * bf16/fp16 scale is exact in float32 (at most 11 significant bits).
    w = (w.view(N, K // group, group) * scales.float().unsqueeze(-1)).reshape(N, K)
    return x.float() @ w.T
