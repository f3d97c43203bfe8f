"""Inputs for torch2triton/mask_compact: a selection mask (e.g. tokens kept by a filter or
routed to one expert) whose density varies along the stream around the case's density,
and float32 scores."""

import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    N, density = int(case["N"]), float(case["density"])
    g = torch.Generator(device=device).manual_seed(seed)
    # the density drifts by up to +-50% of itself over stretches of 1024 positions
    stretches = (N + 1023) // 1024
    local = density * (0.5 + torch.rand((stretches,), generator=g, device=device))
    local = local.clamp_(max=1.0).repeat_interleave(1024)[:N]
    mask = torch.rand((N,), generator=g, device=device) < local
    values = torch.randn((N,), generator=g, device=device, dtype=torch.float32)
    return {"mask": mask, "values": values}
