"""PyTorch baseline for torch2triton/moe_grouped_gemm: PyTorch's grouped GEMM.

On an NVIDIA GPU with bfloat16 inputs this is ``torch._grouped_mm`` (CUTLASS's grouped GEMM on
sm90), which reads the group ends from a device tensor: nothing waits for the GPU, so a timed
block of calls can be queued ahead of the judge's start signal (an eager loop over experts has to
copy the offsets to the host first, and a call that waits for the GPU cannot be timed). Elsewhere
(the CPU smoke case, float16) every expert's GEMM runs on every row and a mask keeps its own rows:
E times the work, still without a host sync, for small shapes only.
"""

import torch


def moe_grouped_gemm(x: torch.Tensor, expert_offsets: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    ends = expert_offsets[1:].to(torch.int32)
    n, k = w.shape[1], w.shape[2]
    if x.is_cuda and x.dtype == torch.bfloat16 and n % 8 == 0 and k % 8 == 0:
        return torch._grouped_mm(x, w.transpose(1, 2), offs=ends)
    rows = torch.arange(x.shape[0], device=x.device, dtype=torch.int32)
    expert = torch.searchsorted(ends, rows, right=True)
    out = torch.zeros((x.shape[0], n), device=x.device, dtype=torch.float32)
    for e in range(w.shape[0]):
        out += (expert == e).unsqueeze(1) * (x @ w[e].T).float()
    return out.to(x.dtype)
