"""rope_gptj in CUDA: q and k rotated by one kernel, one block per token (kernel.cu)."""

import torch
from aka_backend_cuda import load

_lib = load("kernel.cu", functions=["rope_gptj_bf16"])

HEAD_DIM = 128


def rope_gptj(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    if q.dtype != torch.bfloat16 or k.dtype != torch.bfloat16:
        raise TypeError(f"rope_gptj handles bfloat16 q and k, got {q.dtype} and {k.dtype}")
    if cos.dtype != torch.float32 or sin.dtype != torch.float32:
        raise TypeError(f"rope_gptj takes float32 cos and sin, got {cos.dtype} and {sin.dtype}")
    T, Hq, D = q.shape
    Hk = k.shape[1]
    if (
        D != HEAD_DIM
        or k.shape != (T, Hk, HEAD_DIM)
        or cos.shape != (T, HEAD_DIM // 2)
        or sin.shape != cos.shape
    ):
        raise ValueError(f"shapes {tuple(q.shape)} {tuple(k.shape)} {tuple(cos.shape)} {tuple(sin.shape)}")
    q, k, cos, sin = q.contiguous(), k.contiguous(), cos.contiguous(), sin.contiguous()
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _lib.rope_gptj_bf16(q, k, cos, sin, q_out, k_out, T, Hq, Hk)
    return q_out, k_out
