"""PyTorch eager baseline for torch2triton/swiglu_quant_fp8 (one kernel per op)."""

import torch
import torch.nn.functional as F


def swiglu_quant_fp8(x: torch.Tensor):
    xf = x.float()
    a, b = xf.chunk(2, dim=-1)
    y = F.silu(a) * b
    scale = torch.clamp(y.abs().amax(dim=-1) / 448.0, min=1e-12)
    q = torch.clamp(y / scale[:, None], -448.0, 448.0).to(torch.float8_e4m3fn)
    return q, scale
