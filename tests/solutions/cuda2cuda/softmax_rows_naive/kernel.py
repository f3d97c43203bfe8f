"""softmax_rows in CUDA: one block per row, the row read once (kernel.cu)."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["softmax_rows_bf16"])


def _empty_at_same_offset(x: torch.Tensor) -> torch.Tensor:
    """An empty tensor like x whose data sit at x's offset from a 16-byte boundary (the kernel
    splits x's and y's rows at the same element), also when x is a view into a larger tensor."""
    shift = (x.data_ptr() % 16) // x.element_size()
    if shift == 0:
        return torch.empty_like(x)
    buffer = torch.empty((x.numel() + 8,), dtype=x.dtype, device=x.device)
    return buffer[shift : shift + x.numel()].view(x.shape)


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.bfloat16 or x.dim() != 2:
        raise TypeError(f"softmax_rows handles bfloat16 [M, N], got {x.dtype} {tuple(x.shape)}")
    x = x.contiguous()
    M, N = x.shape
    out = _empty_at_same_offset(x)
    _lib.softmax_rows_bf16(x, out, M, N)
    return out
