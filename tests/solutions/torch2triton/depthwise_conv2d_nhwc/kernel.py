"""3x3 depthwise conv2d (stride 1, padding 1) with bias on NHWC bf16, in Triton.

Each program owns one output row segment: image n, row h, BLOCK_W columns and BLOCK_C
channels (channels are contiguous, so every tap is a coalesced [BLOCK_W, BLOCK_C] load of
whole channel vectors). It loads the 9 taps of its channels and the bias once, then reads
the 3x3 neighbourhood as 9 shifted, masked loads (zero outside the image), accumulates in
float32 and stores bf16 once, with the bias folded in. Programs of neighbouring rows run
back to back (the row index is the fastest grid axis), so the three input rows a program
reads are shared through L1/L2 and x crosses HBM about once.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _dwconv3x3_nhwc_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, W, C,
                           BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_nh = tl.program_id(0)
    pid_w = tl.program_id(1)
    pid_c = tl.program_id(2)
    n = pid_nh // H
    h = pid_nh % H
    ws = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    c_mask = cs < C
    acc = tl.zeros([BLOCK_W, BLOCK_C], dtype=tl.float32)
    acc += tl.load(b_ptr + cs, mask=c_mask, other=0.0).to(tl.float32)[None, :]
    for i in tl.static_range(3):
        hh = h + i - 1
        row_ok = (hh >= 0) & (hh < H)
        row = (n.to(tl.int64) * H + hh) * W
        for j in tl.static_range(3):
            wk = tl.load(w_ptr + cs * 9 + (i * 3 + j), mask=c_mask, other=0.0).to(tl.float32)
            ww = ws + j - 1
            m = (row_ok & (ww >= 0) & (ww < W))[:, None] & c_mask[None, :]
            xv = tl.load(x_ptr + (row + ww)[:, None] * C + cs[None, :], mask=m, other=0.0)
            acc += xv.to(tl.float32) * wk[None, :]
    out_row = (n.to(tl.int64) * H + h) * W
    out_mask = (ws < W)[:, None] & c_mask[None, :]
    tl.store(y_ptr + (out_row + ws)[:, None] * C + cs[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=out_mask)


def depthwise_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    weight = weight.contiguous()
    bias = bias.contiguous()
    N, H, W, C = x.shape
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    block_c = min(64, max(8, triton.next_power_of_2(C)))
    block_w = min(max(1, 2048 // block_c), max(2, triton.next_power_of_2(W)))
    grid = (N * H, triton.cdiv(W, block_w), triton.cdiv(C, block_c))
    _dwconv3x3_nhwc_kernel[grid](x, weight, bias, y, H, W, C, BLOCK_W=block_w, BLOCK_C=block_c,
                                 num_warps=4)
    return y
