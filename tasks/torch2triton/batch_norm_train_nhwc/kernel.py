"""Training-mode BatchNorm forward on channels-last activations, in Triton: to be written."""

import torch


def batch_norm_train_nhwc(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    """Return (y, mean, var): batch-normalized x and the per-channel batch statistics.

    x: [N, H, W, C] bfloat16 (float16 in the CPU smoke case), contiguous (channels last);
    weight, bias: [C] float32. mean, var: float32 [C], the mean and biased variance of each
    channel over N * H * W; y = (x - mean) / sqrt(var + eps) * weight + bias, x's dtype.
    """
    raise NotImplementedError("implement batch_norm_train_nhwc with Triton kernels")
