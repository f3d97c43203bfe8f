"""Stream compaction of the values selected by a boolean mask, in Triton: to be written."""

import torch


def mask_compact(mask: torch.Tensor, values: torch.Tensor):
    """Return (out_values, count, out_idx): the selected values packed to the front, in order.

    mask: [N] torch.bool; values: [N] float32. With idx the positions where mask is True, in
    increasing order: out_values[:count] = values[idx], out_values[count:] = 0 (float32 [N]);
    count = len(idx) (a 0-dim int64 tensor on the device); out_idx[:count] = idx,
    out_idx[count:] = -1 (int64 [N]).
    """
    raise NotImplementedError("implement mask_compact with Triton kernels")
