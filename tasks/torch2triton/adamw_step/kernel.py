"""One fused AdamW update in Triton: to be written."""

import torch


def adamw_step(
    p: torch.Tensor,
    g: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
):
    """Return (p_new, m_new, v_new): one AdamW step, as new float32 tensors [N].

    p, g, m, v: contiguous float32 [N]; the scalars are Python numbers; step >= 1.
    """
    raise NotImplementedError("implement adamw_step with a Triton kernel")
