"""The Triton kernels of ``fused_compare`` (imported only where Triton is asked for): the
correctness phase's quick pass, one program per block of elements with the figures written out,
and the timed audits' flag, one program for a whole (small) sample.

Both test each element the same way (``_element_tests``): a NaN where the reference has none or
none where it has one, or an infinity that is not the reference's, is special; a finite error
beyond ``(atol + rtol * |ref|) * slack`` is outside. The arithmetic is float32 for 16- and 32-bit
floats, float64 where either side is float64 (``WIDE``: its digits kept, as the PyTorch pass),
and NaN and infinities are told by their bits (no comparison a compiler may fold).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _element_tests(out_ptr, ref_ptr, offs, inside, atol, rtol, slack, WIDE: tl.constexpr):
    """``err`` (output less reference where both are finite, else 0), the reference where both
    are finite (else 0), and whether each element is special or outside its bound."""
    if WIDE:
        o = tl.load(out_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        r = tl.load(ref_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        o_bits = o.to(tl.int64, bitcast=True)
        r_bits = r.to(tl.int64, bitcast=True)
        magnitude = 0x7FFFFFFFFFFFFFFF  # all but the sign
        infinity = 0x7FF0000000000000  # larger magnitudes are NaN
    else:
        o = tl.load(out_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        r = tl.load(ref_ptr + offs, mask=inside, other=0.0).to(tl.float32)
        o_bits = o.to(tl.int32, bitcast=True)
        r_bits = r.to(tl.int32, bitcast=True)
        magnitude = 0x7FFFFFFF
        infinity = 0x7F800000
    o_mag = o_bits & magnitude
    r_mag = r_bits & magnitude
    nan_o = o_mag > infinity
    nan_r = r_mag > infinity
    inf_o = o_mag == infinity
    inf_r = r_mag == infinity
    finite = (o_mag < infinity) & (r_mag < infinity)
    special = (nan_o != nan_r) | ((inf_o | inf_r) & (o_bits != r_bits))
    err = tl.where(finite, o - r, 0.0)
    ref_finite = tl.where(finite, r, 0.0)
    outside = (tl.abs(err) > (atol + rtol * tl.abs(r)) * slack) & finite
    return err, ref_finite, special | outside


# n and blocks not specialized: one compiled kernel per pair of dtypes, whatever the size.
@triton.jit(do_not_specialize=["n", "blocks"])
def quick_pass_blocks(out_ptr, ref_ptr, n, atol, rtol, slack, partials_ptr, blocks,
                      BLOCK: tl.constexpr, WIDE: tl.constexpr):
    """Per block: whether any element is bad, the largest absolute and relative errors, and the
    sums of squares of the error and of the reference (``fused_compare.figures`` combines them)."""
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    err, ref_finite, bad = _element_tests(out_ptr, ref_ptr, offs, inside, atol, rtol, slack, WIDE)
    diff = tl.abs(err)
    rel = diff / tl.maximum(tl.abs(ref_finite), 1e-30)
    bad = bad & inside
    tl.store(partials_ptr + pid, tl.max(bad.to(tl.float32), axis=0))
    tl.store(partials_ptr + blocks + pid, tl.max(diff, axis=0))
    tl.store(partials_ptr + 2 * blocks + pid, tl.max(rel, axis=0))
    tl.store(partials_ptr + 3 * blocks + pid, tl.sum(err * err, axis=0))
    tl.store(partials_ptr + 4 * blocks + pid, tl.sum(ref_finite * ref_finite, axis=0))


@triton.jit(do_not_specialize=["n"])
def audit_flag_kernel(out_ptr, ref_ptr, n, atol, rtol, slack, max_l2, flag_ptr,
                      BLOCK: tl.constexpr, WIDE: tl.constexpr):
    """One program reads the whole output and writes one flag (1: not clearly within): nothing
    is combined on the host, so many flags are read back with one wait. ``max_l2``: the
    relative-L2 bound, infinite where the task sets none (never exceeded)."""
    bad = tl.zeros([BLOCK], dtype=tl.int32)
    if WIDE:
        err2 = tl.zeros([BLOCK], dtype=tl.float64)
        ref2 = tl.zeros([BLOCK], dtype=tl.float64)
    else:
        err2 = tl.zeros([BLOCK], dtype=tl.float32)
        ref2 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        inside = offs < n
        err, ref_finite, bad_here = _element_tests(out_ptr, ref_ptr, offs, inside, atol, rtol,
                                                   slack, WIDE)
        bad = bad | (bad_here & inside).to(tl.int32)
        err2 += err * err
        ref2 += ref_finite * ref_finite
    failed = tl.max(bad, axis=0) > 0
    err_norm = tl.sqrt(tl.sum(err2, axis=0))
    ref_norm = tl.sqrt(tl.sum(ref2, axis=0))
    # Norms that overflowed (or NaN) say nothing: raised, and PyTorch's flag decides.
    if WIDE:
        failed = failed | ((err_norm.to(tl.int64, bitcast=True) & 0x7FFFFFFFFFFFFFFF)
                           >= 0x7FF0000000000000)
        failed = failed | ((ref_norm.to(tl.int64, bitcast=True) & 0x7FFFFFFFFFFFFFFF)
                           >= 0x7FF0000000000000)
    else:
        failed = failed | ((err_norm.to(tl.int32, bitcast=True) & 0x7FFFFFFF) >= 0x7F800000)
        failed = failed | ((ref_norm.to(tl.int32, bitcast=True) & 0x7FFFFFFF) >= 0x7F800000)
    bound = max_l2 * slack
    failed = failed | tl.where(ref_norm > 0, err_norm > bound * ref_norm, err_norm > bound)
    tl.store(flag_ptr, failed.to(tl.int8))
