"""MoE grouped GEMM in Triton: every expert's rows times that expert's weights. To be written."""

import torch


def moe_grouped_gemm(x: torch.Tensor, expert_offsets: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Return out [T, N] in x's dtype with out[s:t] = x[s:t] @ w[e]^T for every expert e,
    where s, t = expert_offsets[e], expert_offsets[e + 1].

    x: [T, K] (rows sorted by expert); expert_offsets: [E + 1] int64, nondecreasing, from 0
    to T; w: [E, N, K]; x and w share one dtype (bfloat16 in the timed cases), contiguous.
    """
    raise NotImplementedError("write one grouped GEMM kernel over (expert, m-tile, n-tile)")
