"""Reference for torch2triton/moe_grouped_gemm: each expert's rows times its weights, in float32."""

import torch


def moe_grouped_gemm_reference(x: torch.Tensor, expert_offsets: torch.Tensor,
                               w: torch.Tensor) -> torch.Tensor:
    out = torch.empty((x.shape[0], w.shape[1]), device=x.device, dtype=torch.float32)
    offsets = expert_offsets.tolist()
    for e in range(w.shape[0]):
        start, end = offsets[e], offsets[e + 1]
        if end > start:
            out[start:end] = x[start:end].float() @ w[e].float().T
    return out
