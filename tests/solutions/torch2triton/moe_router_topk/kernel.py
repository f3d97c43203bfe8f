"""MoE router top-k in Triton: one pass over the logits, no probability tensor.

The renormalised top-k softmax weights equal a softmax over the k selected logits alone
(the full softmax's denominator cancels), so the kernel never computes the E-wide softmax.
Each program loads a [BLOCK_T, BLOCK_E] tile of rows (every row whole, E <= 256), selects the
k largest logits by k rounds of a row-wise max-with-index (masking each winner out), then
takes exp(l_j - l_0) / sum over the k winners and writes the k weights and ids. The logits
are read from HBM exactly once; nothing else of size T x E is written.
"""

import torch
import triton
import triton.language as tl

_TILE = 4096  # logits per program: 16 rows of 256, 32 rows of 128, ...


@triton.jit
def _router_topk_kernel(x_ptr, w_ptr, id_ptr, T, E, stride_x,
                        K: tl.constexpr, KPAD: tl.constexpr,
                        BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    kcols = tl.arange(0, KPAD)
    row_ok = rows < T
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :],
                mask=row_ok[:, None] & (cols[None, :] < E), other=-float("inf"))
    # rows past T: finite filler, so that no inf - inf appears below (they are never stored)
    x = tl.where(row_ok[:, None], x, 0.0)
    top = tl.full((BLOCK_T, KPAD), -float("inf"), tl.float32)
    top_ids = tl.zeros((BLOCK_T, KPAD), dtype=tl.int32)
    for j in tl.static_range(K):
        best, best_id = tl.max(x, axis=1, return_indices=True)
        top = tl.where(kcols[None, :] == j, best[:, None], top)
        top_ids = tl.where(kcols[None, :] == j, best_id[:, None].to(tl.int32), top_ids)
        x = tl.where(cols[None, :] == best_id[:, None], -float("inf"), x)
    # softmax over the k winners; top[:, 0] is the row maximum, padding columns give exp(-inf) = 0
    e = tl.exp(top - tl.max(top, axis=1)[:, None])
    weights = e / tl.sum(e, axis=1)[:, None]
    out = rows64[:, None] * K + kcols[None, :]
    out_mask = row_ok[:, None] & (kcols[None, :] < K)
    tl.store(w_ptr + out, weights, mask=out_mask)
    tl.store(id_ptr + out, top_ids, mask=out_mask)


def moe_router_topk(logits: torch.Tensor, k: int):
    """Return (weights, ids) for the k most probable experts of every token.

    logits: [T, E] float32, contiguous. weights: float32 [T, k], the softmax probabilities of
    the chosen experts renormalised to sum to 1, in descending order; ids: int32 [T, k], the
    matching expert indices.
    """
    assert logits.ndim == 2 and logits.stride(1) == 1
    T, E = logits.shape
    k = int(k)
    assert 1 <= k <= E
    weights = torch.empty((T, k), device=logits.device, dtype=torch.float32)
    ids = torch.empty((T, k), device=logits.device, dtype=torch.int32)
    if T == 0:
        return weights, ids
    BLOCK_E = triton.next_power_of_2(E)
    BLOCK_T = max(1, _TILE // BLOCK_E)
    grid = (triton.cdiv(T, BLOCK_T),)
    _router_topk_kernel[grid](logits, weights, ids, T, E, logits.stride(0),
                              K=k, KPAD=triton.next_power_of_2(k),
                              BLOCK_T=BLOCK_T, BLOCK_E=BLOCK_E, num_warps=4)
    return weights, ids
