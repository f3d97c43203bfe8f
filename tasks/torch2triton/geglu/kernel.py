"""GeGLU (tanh GELU of the gate times the up half) in Triton: to be written."""

import torch


def geglu(x: torch.Tensor) -> torch.Tensor:
    """Return gelu_tanh(x[:, :H]) * x[:, H:] as a new bfloat16 [T, H] tensor.

    x: [T, 2H] bfloat16, contiguous; gelu_tanh(a) = 0.5 * a * (1 + tanh(sqrt(2/pi) * (a + 0.044715 a^3))).
    """
    raise NotImplementedError("implement geglu with a Triton kernel")
