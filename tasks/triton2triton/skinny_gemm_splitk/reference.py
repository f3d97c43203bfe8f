"""Reference for triton2triton/skinny_gemm_splitk: y = x @ weight^T in float64."""

import torch


def skinny_gemm_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    # float64 keeps the reference free of TF32 settings and of accumulation-order error
    return x.double() @ weight.double().T
