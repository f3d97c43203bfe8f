"""RMSNorm in FlyDSL: one workgroup per row, the row read once and kept in registers.

y[i, :] = x[i, :] * rsqrt(mean(x[i, :]^2) + eps) * weight, in float32, rounded once.

A kernel is built per row length N (a compile-time constant, so the loops over the row unroll):
256 threads (4 wavefronts of 64 on CDNA3) stride over the row in 16-byte vectors (the vector
path needs N to be a multiple of the vector width and 16-byte aligned data; otherwise one element
at a time). Pass 1 loads the row, keeping it in registers when it is at most MAX_CACHED vectors
per thread, and sums the squares; the block reduces with a butterfly within each wavefront and
one float per wavefront in LDS; pass 2 scales, multiplies by the weight and stores. The last,
partial step of a row clamps its loads to column 0 and skips its stores. Element indices are
32-bit: M * N < 2^31.

A @flyc.jit function traces its body on every call, so each specialization (per dtype, N and
path: the row count and the tensors' shapes are runtime values) is compiled once with
flyc.compile and then called directly. Launches go to PyTorch's current stream (None, the null
stream, on a host without a GPU).
"""

import functools
import math

import flydsl.compiler as flyc
import flydsl.expr as fx
import torch
from flydsl.expr import const_expr, gpu, range_constexpr
from flydsl.expr import math as fmath
from flydsl.expr.typing import ReductionOp

BLOCK = 256  # threads per workgroup (one row)
MAX_CACHED = 8  # vectors per thread kept in registers between the two passes
MAX_WAVES = BLOCK // 32  # LDS slots: one per wavefront, for 32- or 64-lane wavefronts


@functools.cache
def _build(n: int, vec: int):
    """The launcher for rows of ``n`` elements moved ``vec`` at a time (1: scalar path)."""
    nv = n // vec  # vectors per row
    steps = (nv + BLOCK - 1) // BLOCK  # vectors per thread
    cached = steps <= MAX_CACHED

    @fx.struct
    class Shared:
        partial: fx.Array[fx.Float32, MAX_WAVES, 16]

    @flyc.kernel
    def rms_norm_kernel(X: fx.Tensor, W: fx.Tensor, Y: fx.Tensor, eps: fx.Float32):
        dtype = X.element_type
        atom = fx.make_copy_atom(fx.UniversalCopy(vec * dtype.width), dtype)
        xv = fx.logical_divide(X, fx.make_layout(vec, 1))
        wv = fx.logical_divide(W, fx.make_layout(vec, 1))
        yv = fx.logical_divide(Y, fx.make_layout(vec, 1))
        lds = fx.SharedAllocator().allocate(Shared).peek()
        partial = lds.partial.view(fx.make_layout(MAX_WAVES, 1))
        lanes = gpu.num_warp_threads()
        waves = BLOCK // lanes
        tid = fx.thread_idx.x
        base = fx.block_idx.x * nv  # the row's first vector

        def load(view, index):
            r = fx.make_rmem_tensor(vec, dtype)
            fx.copy_atom_call(atom, fx.slice(view, (None, index)), r)
            return fx.memref_load_vec(r).to(fx.Float32)

        def column(step):
            """This thread's vector of the step, and the same clamped into the row."""
            c = step * BLOCK + tid
            if const_expr((step + 1) * BLOCK <= nv):
                return c, c
            return c, (c < nv).select(c, 0)

        # Pass 1: sum of squares (the row kept in registers when it fits).
        sumsq = fx.Float32(0.0)
        rows = []
        for step in range_constexpr(steps):
            c, safe = column(step)
            x = load(xv, base + safe)
            square = (x * x).reduce(ReductionOp.ADD)
            if const_expr((step + 1) * BLOCK <= nv):
                sumsq = sumsq + square
            else:
                sumsq = sumsq + (c < nv).select(square, 0.0)
            if const_expr(cached):
                rows.append(x)

        # Block sum: butterfly within each wavefront, then one partial per wavefront in LDS.
        for i in range_constexpr(int(math.log2(lanes))):
            sumsq = sumsq + sumsq.shuffle_xor(lanes >> (i + 1), lanes)
        if tid % lanes == 0:
            fx.memref_store(sumsq, partial, tid // lanes)
        gpu.barrier()
        total = fx.memref_load(partial, 0)
        for i in range_constexpr(1, waves):
            total = total + fx.memref_load(partial, i)
        rstd = fmath.rsqrt(total * (1.0 / n) + eps)

        # Pass 2: scale, weight, store.
        for step in range_constexpr(steps):
            c, safe = column(step)
            x = rows[step] if const_expr(cached) else load(xv, base + safe)
            w = load(wv, safe)
            out = fx.make_rmem_tensor(vec, dtype)
            fx.memref_store_vec((x * rstd * w).to(dtype), out)
            if const_expr((step + 1) * BLOCK <= nv):
                fx.copy_atom_call(atom, out, fx.slice(yv, (None, base + c)))
            else:
                if c < nv:
                    fx.copy_atom_call(atom, out, fx.slice(yv, (None, base + c)))

    @flyc.jit
    def rms_norm_rows(X: fx.Tensor, W: fx.Tensor, Y: fx.Tensor, m: fx.Int32, eps: fx.Float32,
                      stream: fx.Stream):
        rms_norm_kernel(X, W, Y, eps).launch(grid=(m, 1, 1), block=(BLOCK, 1, 1), stream=stream)

    return rms_norm_rows


_compiled: dict = {}


def _launch(jit_fn, key, *args) -> None:
    """Call the compiled specialization; the first call compiles it (and launches it)."""
    compiled = _compiled.get(key)
    if compiled is not None:
        compiled(*args)
        return
    compiled = flyc.compile(jit_fn, *args)  # None in FlyDSL's COMPILE_ONLY mode: built, not run
    if compiled is not None:
        _compiled[key] = compiled


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.contiguous()
    weight = weight.to(x.dtype).contiguous()
    m, n = x.shape
    y = torch.empty_like(x)
    if m == 0 or n == 0:
        return y
    vec = 16 // x.element_size()
    aligned = all(t.data_ptr() % 16 == 0 for t in (x, weight, y))
    if n % vec or not aligned:
        vec = 1
    stream = torch.cuda.current_stream() if x.is_cuda else None  # None: no GPU (compile-only)
    _launch(_build(n, vec), (x.dtype, n, vec), x.view(-1), weight, y.view(-1), m, float(eps), stream)
    return y
