"""Reference for torch2hip/fused_add_layer_norm, computed in float32 from the bf16 sum."""

import torch
import torch.nn.functional as F


def fused_add_layer_norm_reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                                   bias: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    r = (x.float() + residual.float()).to(x.dtype)  # the residual stream is stored in bf16
    y = F.layer_norm(r.float(), (r.shape[-1],), weight.float(), bias.float(), eps)
    return y, r
