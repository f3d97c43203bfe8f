"""RMSNorm kernels of the serving engine (baseline: eager PyTorch, several launches each).

rms_norm(x[T,H] bf16, weight[H] bf16, eps) -> [T,H] bf16
fused_add_rms_norm(x[T,H], residual[T,H], weight[H], eps) -> (normed, residual_out = x + residual)
"""

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.float().pow(2).mean(-1, keepdim=True)
    normed = x.float() * torch.rsqrt(variance + eps)
    return normed.to(x.dtype) * weight


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    residual_out = x + residual
    return rms_norm(residual_out, weight, eps), residual_out
