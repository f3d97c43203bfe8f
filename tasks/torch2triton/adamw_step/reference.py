"""Reference for torch2triton/adamw_step: one AdamW update (decoupled weight decay), in float64."""

import torch


def adamw_step_reference(
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
    pd, gd, md, vd = (t.double() for t in (p, g, m, v))
    m_new = beta1 * md + (1.0 - beta1) * gd
    v_new = beta2 * vd + (1.0 - beta2) * gd * gd
    bc1 = 1.0 - beta1**step
    bc2 = 1.0 - beta2**step
    update = (m_new / bc1) / (torch.sqrt(v_new / bc2) + eps)
    p_new = pd * (1.0 - lr * weight_decay) - lr * update
    return p_new, m_new, v_new
