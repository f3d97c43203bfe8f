"""SiLU-and-mul in FlyDSL: one pass over x, 16-byte vector accesses, float32 math.

out[r, c] = g / (1 + exp2(-g * log2(e))) * u, with g = x[r, c] and u = x[r, N + c].

Vector path (N a multiple of the 16-byte vector width, 16-byte aligned data): the grid is
(rows, column blocks); every thread of a 256-thread workgroup (4 wavefronts of 64) loads UNROLL
vectors of g and of u (all loads issued before any math; out-of-range columns load column 0 of
the row instead and are not stored), then stores UNROLL vectors of out. Otherwise a scalar path
with one guarded element per thread. Element indices are 32-bit: M * 2N < 2^31.

A @flyc.jit function traces its body on every call, so each specialization (one per dtype and
path: the tensors' shapes are dynamic) is compiled once with flyc.compile and then called
directly. Launches go to PyTorch's current stream (None, the null stream, on a host without a
GPU).
"""

import flydsl.compiler as flyc
import flydsl.expr as fx
import torch
from flydsl.expr import math as fmath
from flydsl.expr import range_constexpr

BLOCK = 256  # threads per workgroup
UNROLL = 2  # vectors of g (and of u) per thread
MINUS_LOG2E = -1.4426950408889634


def _silu_mul(g, u):
    """silu(g) * u of float32 values or vectors."""
    return g / (1.0 + fmath.exp2(g * MINUS_LOG2E)) * u


@flyc.kernel
def silu_mul_vec_kernel(X: fx.Tensor, Out: fx.Tensor, nv: fx.Int32):
    dtype = X.element_type
    vec = 128 // dtype.width
    atom = fx.make_copy_atom(fx.UniversalCopy128b(), dtype)
    xv = fx.logical_divide(X, fx.make_layout(vec, 1))
    ov = fx.logical_divide(Out, fx.make_layout(vec, 1))
    row = fx.block_idx.x
    gate = row * (2 * nv)  # vector index of the row's gate; its up projection starts nv later
    first = fx.block_idx.y * (BLOCK * UNROLL) + fx.thread_idx.x
    loaded = []
    for k in range_constexpr(UNROLL):
        c = first + k * BLOCK
        safe = (c < nv).select(c, 0)
        rg = fx.make_rmem_tensor(vec, dtype)
        ru = fx.make_rmem_tensor(vec, dtype)
        fx.copy_atom_call(atom, fx.slice(xv, (None, gate + safe)), rg)
        fx.copy_atom_call(atom, fx.slice(xv, (None, gate + nv + safe)), ru)
        loaded.append((fx.memref_load_vec(rg), fx.memref_load_vec(ru)))
    for k in range_constexpr(UNROLL):
        c = first + k * BLOCK
        g, u = loaded[k]
        y = _silu_mul(g.to(fx.Float32), u.to(fx.Float32)).to(dtype)
        if c < nv:
            r = fx.make_rmem_tensor(vec, dtype)
            fx.memref_store_vec(y, r)
            fx.copy_atom_call(atom, r, fx.slice(ov, (None, row * nv + c)))


@flyc.kernel
def silu_mul_scalar_kernel(X: fx.Tensor, Out: fx.Tensor, n: fx.Int32):
    dtype = X.element_type
    atom = fx.make_copy_atom(fx.UniversalCopy(dtype.width), dtype)
    row = fx.block_idx.x
    c = fx.block_idx.y * BLOCK + fx.thread_idx.x
    if c < n:
        xs = fx.logical_divide(X, fx.make_layout(1, 1))
        os_ = fx.logical_divide(Out, fx.make_layout(1, 1))
        rg = fx.make_rmem_tensor(1, dtype)
        ru = fx.make_rmem_tensor(1, dtype)
        fx.copy_atom_call(atom, fx.slice(xs, (None, row * (2 * n) + c)), rg)
        fx.copy_atom_call(atom, fx.slice(xs, (None, row * (2 * n) + n + c)), ru)
        g = fx.memref_load_vec(rg).to(fx.Float32)
        u = fx.memref_load_vec(ru).to(fx.Float32)
        r = fx.make_rmem_tensor(1, dtype)
        fx.memref_store_vec(_silu_mul(g, u).to(dtype), r)
        fx.copy_atom_call(atom, r, fx.slice(os_, (None, row * n + c)))


@flyc.jit
def silu_mul_vec(X: fx.Tensor, Out: fx.Tensor, m: fx.Int32, nv: fx.Int32,
                 stream: fx.Stream):
    col_blocks = (nv + BLOCK * UNROLL - 1) // (BLOCK * UNROLL)
    silu_mul_vec_kernel(X, Out, nv).launch(grid=(m, col_blocks, 1), block=(BLOCK, 1, 1), stream=stream)


@flyc.jit
def silu_mul_scalar(X: fx.Tensor, Out: fx.Tensor, m: fx.Int32, n: fx.Int32,
                    stream: fx.Stream):
    col_blocks = (n + BLOCK - 1) // BLOCK
    silu_mul_scalar_kernel(X, Out, n).launch(grid=(m, col_blocks, 1), block=(BLOCK, 1, 1), stream=stream)


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


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    m, two_n = x.shape
    n = two_n // 2
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    if m == 0 or n == 0:
        return out
    vec = 16 // x.element_size()
    flat_x, flat_out = x.view(-1), out.view(-1)
    stream = torch.cuda.current_stream() if x.is_cuda else None  # None: no GPU (compile-only)
    if n % vec == 0 and x.data_ptr() % 16 == 0 and out.data_ptr() % 16 == 0:
        _launch(silu_mul_vec, ("vec", x.dtype), flat_x, flat_out, m, n // vec, stream)
    else:
        _launch(silu_mul_scalar, ("scalar", x.dtype), flat_x, flat_out, m, n, stream)
    return out
