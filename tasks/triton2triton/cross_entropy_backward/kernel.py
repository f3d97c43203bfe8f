"""Cross-entropy backward (mean over non-ignored rows) in Triton.

Three kernels: one counts the non-ignored labels; one program per row then walks the row three
times (the max, the sum of exponentials, and writing softmax * grad / n_valid) and saves the
row's log-sum-exp; a last kernel overwrites each row's label entry with
(softmax - 1) * grad / n_valid.
"""

import torch
import triton
import triton.language as tl

IGNORE_INDEX = -100


@triton.jit
def _count_valid_kernel(labels_ptr, count_ptr, B, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    total = 0.0
    for start in range(0, B, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        labels = tl.load(labels_ptr + offs, mask=offs < B, other=IGNORE)
        total += tl.sum((labels != IGNORE).to(tl.float32), axis=0)
    tl.store(count_ptr, total)


@triton.jit
def _softmax_grad_kernel(logits_ptr, labels_ptr, grad_ptr, count_ptr, dlogits_ptr, lse_ptr, V,
                         stride, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    in_row = logits_ptr + row * stride
    out_row = dlogits_ptr + row * stride
    row_max = -float("inf")
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_row + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        row_max = tl.maximum(row_max, tl.max(x, axis=0))
    row_sum = 0.0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_row + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        row_sum += tl.sum(tl.exp(x - row_max), axis=0)
    label = tl.load(labels_ptr + row)
    scale = tl.load(grad_ptr) / tl.load(count_ptr)
    scale = tl.where(label != IGNORE, scale, 0.0)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(in_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        p = tl.exp(x - row_max) / row_sum
        tl.store(out_row + cols, (p * scale).to(dlogits_ptr.dtype.element_ty), mask=mask)
    tl.store(lse_ptr + row, row_max + tl.log(row_sum))


@triton.jit
def _label_grad_kernel(logits_ptr, labels_ptr, grad_ptr, count_ptr, lse_ptr, dlogits_ptr,
                       stride, IGNORE: tl.constexpr):
    row = tl.program_id(0)
    label = tl.load(labels_ptr + row)
    if label != IGNORE:
        x = tl.load(logits_ptr + row * stride + label).to(tl.float32)
        p = tl.exp(x - tl.load(lse_ptr + row))
        scale = tl.load(grad_ptr) / tl.load(count_ptr)
        tl.store(dlogits_ptr + row * stride + label,
                 ((p - 1.0) * scale).to(dlogits_ptr.dtype.element_ty))


def cross_entropy_backward(logits: torch.Tensor, labels: torch.Tensor,
                           grad: torch.Tensor) -> torch.Tensor:
    logits = logits.contiguous()
    labels = labels.contiguous()
    B, V = logits.shape
    dlogits = torch.empty_like(logits)
    count = torch.empty((), device=logits.device, dtype=torch.float32)
    lse = torch.empty((B,), device=logits.device, dtype=torch.float32)
    _count_valid_kernel[(1,)](labels, count, B, IGNORE=IGNORE_INDEX, BLOCK=1024, num_warps=4)
    _softmax_grad_kernel[(B,)](logits, labels, grad, count, dlogits, lse, V, logits.stride(0),
                               IGNORE=IGNORE_INDEX, BLOCK=1024, num_warps=4)
    _label_grad_kernel[(B,)](logits, labels, grad, count, lse, dlogits, logits.stride(0),
                             IGNORE=IGNORE_INDEX, num_warps=1)
    return dlogits
