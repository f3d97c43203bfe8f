"""Reference for torch2triton/mlp_swiglu: the whole block in float32, no intermediate rounding."""

import torch


def mlp_swiglu_reference(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
                         w_down: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    gate = xf @ w_gate.float().T
    up = xf @ w_up.float().T
    return (torch.nn.functional.silu(gate) * up) @ w_down.float().T
