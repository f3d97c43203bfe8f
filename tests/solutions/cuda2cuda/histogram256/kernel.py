"""256-bin histogram of a uint8 tensor: allocates the counts and launches kernel.cu."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["histogram256_u8"])


def histogram256(data: torch.Tensor) -> torch.Tensor:
    if data.dtype != torch.uint8 or data.dim() != 1:
        raise TypeError(f"histogram256 handles 1-D uint8 tensors, got {data.dim()}-D {data.dtype}")
    if data.numel() >= 2**31:
        raise ValueError("histogram256 counts in int32: at most 2**31 - 1 bytes")
    data = data.contiguous()
    out = torch.empty((256,), dtype=torch.int32, device=data.device)
    _lib.histogram256_u8(data, out, data.numel())
    return out
