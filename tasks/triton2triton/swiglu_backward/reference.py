"""Reference for triton2triton/swiglu_backward, computed in float64."""

import torch


def swiglu_backward_reference(gate: torch.Tensor, up: torch.Tensor, dy: torch.Tensor):
    g, u, d = gate.double(), up.double(), dy.double()
    sig = torch.sigmoid(g)
    dgate = d * u * sig * (1.0 + g * (1.0 - sig))
    dup = d * g * sig
    return dgate, dup
