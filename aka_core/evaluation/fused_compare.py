"""The correctness comparison's quick pass as one GPU kernel: each output and its reference read
once (the PyTorch pass makes ~30 full passes over float32 temporaries: 8 ms on 134M elements of
an H200, most of a large task's comparison time).

``figures`` gives what ``checking.quick_pass`` decides on: whether any element is special (a NaN
where the reference has none, or none where it has one; an infinity that is not the reference's)
or outside ``(atol + rtol * |ref|) * slack``, the largest absolute and relative error and the L2
norms of the error and of the reference, over finite elements. The arithmetic is float32, as in
the PyTorch pass: each block's sums and maxima are written out and combined in float64, and NaN
and infinities are told by their bits (no comparison a compiler may fold). Denormals may be
flushed to zero, so a tolerance with no absolute part (exact floats) is left to PyTorch
(``MIN_ATOL``). Where either side is float64 (half the corpus' references are), the arithmetic is
float64, its digits kept as in the PyTorch pass. Only float16, bfloat16, float32 and float64
outputs and references on a GPU, with Triton, take this path; anything else, or any error, is
None and the PyTorch pass decides. A quick pass is only ever a shortcut:
where it does not pass clearly, the exact float64 comparison decides and says why.

``audit_flag`` is the same test for a timed audit's sample (at most ``FLAG_MAX`` elements) in one
program that writes one flag on the GPU: no figure is read back, so a block's flags are read with
one wait, and a launch replaces the ~18 PyTorch operators of ``checking.failure_flag`` (most of
an audit's host time). A raised flag is settled by ``checking.failure_flag``. The kernels live in
``fused_compare_kernels``.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

BLOCK = 4096
FLAG_BLOCK = 2048  # the audit flag's one program reads this many elements of each side at a time
FLAG_MAX = 1 << 20  # ... and takes outputs of at most this many (an audit reads 65536 of each)
FLOAT_KINDS = ("float16", "bfloat16", "float32", "float64")
# How clearly inside its bounds an output must be to pass a quick test in float32 (the quick
# pass's and the audit flag's; ``checking.QUICK_MARGIN`` is this).
QUICK_MARGIN = 2.0**-12
DISABLE_ENV = "AKA_FUSED_COMPARE"  # "0": the PyTorch pass everywhere
# The least atol this path takes: a GPU's float32 arithmetic may flush denormals (below 2**-126)
# to zero, an error the quick pass's margin on atol (atol * 2**-12) must dwarf.
MIN_ATOL = 2.0**-100

# Which path this process's quick passes took, and why this one failed if it did (the judge
# records it: a fall back to PyTorch is slower, never wrong, and must not go unseen).
counts = {"fused": 0, "pytorch": 0, "equal": 0}  # "equal": bit-exact outputs, one torch.equal
# The timed audits' flags (``audit_flag``): by the kernel, by PyTorch (where the kernel does not
# apply), and how many the kernel raised that PyTorch's exact flag then settled.
audits = {"fused": 0, "pytorch": 0, "settled": 0}
error: list[str] = []


def summary() -> dict[str, Any]:
    return {**counts, **({"audits": dict(audits)} if any(audits.values()) else {}),
            **({"fused_error": error[0]} if error else {})}


@functools.cache
def _kernel() -> Any:
    """The quick pass's kernel (``fused_compare_kernels``: Triton is imported only when asked)."""
    from aka_core.evaluation import fused_compare_kernels

    return fused_compare_kernels.quick_pass_blocks


@functools.cache
def _flag_kernel() -> Any:
    """The timed audits' one-program flag kernel."""
    from aka_core.evaluation import fused_compare_kernels

    return fused_compare_kernels.audit_flag_kernel


def audit_flag(out: Any, ref: Any, atol: float, rtol: float, max_rel_l2: float | None,
               slack: float) -> Any | None:
    """A boolean scalar tensor on ``out``'s device, false only where ``out`` passes with a
    margin (every element within ``(atol + rtol*|ref|) * slack``, NaN and infinities where the
    reference has them, the relative L2 error within ``max_rel_l2 * slack``), from one kernel
    launch; nothing waits for the device. None where this path cannot say (PyTorch's
    ``checking.failure_flag`` then stands). A raised flag says "not clearly within": the caller
    settles it with PyTorch's exact flag. Outputs of at most ``FLAG_MAX`` elements (a timed
    audit's sample), float16, bfloat16, float32 or float64, ``atol`` at least ``MIN_ATOL``."""
    if os.environ.get(DISABLE_ENV) == "0" or atol < MIN_ATOL:
        return None
    if flag_checked.get("passed") is not True:  # not checked on this GPU, or wrong there
        return None
    if out.device.type != "cuda" or not flag_applies(out, ref):
        return None
    flag = launch_audit_flag(out, ref, atol, rtol, max_rel_l2, slack)
    if flag is None:  # failed once: not tried again in this process (a compile each time)
        flag_checked["passed"] = False
    return flag


# The kernel's own check on this GPU (``check_audit_flag``): until it has passed, PyTorch flags.
flag_checked: dict[str, bool] = {}


def check_audit_flag(device: str = "cuda") -> bool:
    """The audit flag's kernel on cases whose verdicts are known (right outputs, one element far
    in the second chunk, a NaN, infinities where the reference has them, a relative-L2 bound
    broken and kept, 16-bit outputs against float64 references), read with one wait; True if
    every flag is as expected. Otherwise, or if the kernel fails, it is not used in this
    process (PyTorch's flags stand) and why is recorded. Once per process, under the GPU lock
    (it launches kernels): a kernel the compiler or driver got wrong must not judge audits."""
    if "passed" in flag_checked:
        return flag_checked["passed"]
    flag_checked["passed"] = False
    if os.environ.get(DISABLE_ENV) == "0":
        return False
    try:
        import torch

        if device == "cuda" and not torch.cuda.is_available():
            return False  # no GPU here: nothing for the kernel to judge
        n = FLAG_BLOCK + 952  # two chunks of the one program's loop
        ref = torch.linspace(-3.0, 3.0, n, device=device)
        far, nan, inf_ref = ref + 1e-4, ref + 1e-4, ref.clone()
        far[FLAG_BLOCK + 500] += 1.0
        nan[7] = float("nan")
        inf_ref[9] = float("inf")
        cases = [  # out, ref, atol, rtol, max_rel_l2, expected flag
            ("close", ref + 1e-4, ref, 1e-2, 1e-2, None, False),
            ("one far", far, ref, 1e-2, 1e-2, None, True),
            ("a NaN", nan, ref, 1e-2, 1e-2, None, True),
            ("infinities alike", inf_ref.clone(), inf_ref, 1e-2, 1e-2, None, False),
            ("L2 broken", ref * (1 + 5e-3), ref, 1e-2, 1e-2, 1e-3, True),
            ("L2 kept", ref * (1 + 5e-3), ref, 1e-2, 1e-2, 1e-2, False),
            ("bf16 close, float64 ref", ref.bfloat16(), ref.double(), 1e-2, 1e-2, None, False),
            ("fp16 one far, float64 ref", far.half(), ref.double(), 1e-2, 1e-2, None, True),
        ]
        flags = []
        for _, out, expected_ref, atol, rtol, l2, _ in cases:
            flag = launch_audit_flag(out, expected_ref, atol, rtol, l2, 1.0 - QUICK_MARGIN)
            if flag is None:
                return False  # launch_audit_flag recorded why
            flags.append(flag)
        got = [bool(v) for v in torch.stack(flags).tolist()]
        wrong = [case[0] for case, value in zip(cases, got, strict=True) if value != case[-1]]
        if wrong:
            if not error:
                error.append(f"audit flag: wrong on its own check ({', '.join(wrong)}): "
                             "PyTorch's flags are used")
            return False
    except Exception as exc:
        if not error:
            error.append(f"audit flag check: {type(exc).__name__}: {exc}"[:500])
        return False
    flag_checked["passed"] = True
    return True


def flag_applies(out: Any, ref: Any) -> bool:
    """Whether the kernel takes this pair, wherever it lies (tests run it on the CPU through
    Triton's interpreter)."""
    return (out.shape == ref.shape and ref.device == out.device and 0 < out.numel() <= FLAG_MAX
            and all(str(t.dtype).removeprefix("torch.") in FLOAT_KINDS for t in (out, ref)))


def launch_audit_flag(out: Any, ref: Any, atol: float, rtol: float, max_rel_l2: float | None,
                      slack: float) -> Any | None:
    try:
        import torch

        o, r = _flat(out), _flat(ref)
        flag = torch.zeros((), dtype=torch.bool, device=o.device)
        _flag_kernel()[(1,)](o, r, o.numel(), float(atol), float(rtol), float(slack),
                             math.inf if max_rel_l2 is None else float(max_rel_l2),
                             flag.view(torch.int8), BLOCK=FLAG_BLOCK,
                             WIDE=torch.float64 in (o.dtype, r.dtype), num_warps=8)
        return flag
    except Exception as exc:  # Triton missing or failing: PyTorch's flag decides
        if not error:
            error.append(f"audit flag: {type(exc).__name__}: {exc}"[:500])
        return None


def _flat(t: Any) -> Any:
    """``t`` as one contiguous row of its elements (a view where it already is one)."""
    flat = t.detach().reshape(-1)
    return flat if flat.is_contiguous() else flat.contiguous()


def applies(out: Any, ref: Any) -> bool:
    """Whether ``figures`` takes this pair (a GPU, Triton, 16- or 32-bit floats, same shape)."""
    if os.environ.get(DISABLE_ENV) == "0":
        return False
    if out.device.type != "cuda" or ref.device != out.device or out.shape != ref.shape:
        return False
    return all(str(t.dtype).removeprefix("torch.") in FLOAT_KINDS for t in (out, ref))


def figures(out: Any, ref: Any, atol: float, rtol: float, slack: float) -> list[float] | None:
    """``[bad, max_abs, max_rel, err_norm, ref_norm]`` (``bad``: 1.0 if any element is special or
    outside its bound) read with one wait, or None where this path cannot say (the caller then
    compares with PyTorch)."""
    try:
        import torch

        kernel = _kernel()
        o, r = _flat(out), _flat(ref)
        n = o.numel()
        blocks = -(-n // BLOCK)
        wide = torch.float64 in (o.dtype, r.dtype)
        partials = torch.empty((5, blocks), dtype=torch.float64 if wide else torch.float32,
                               device=o.device)
        kernel[(blocks,)](o, r, n, float(atol), float(rtol), float(slack), partials, blocks,
                          BLOCK=BLOCK, WIDE=wide, num_warps=8)
        sums = partials[3:].double().sum(dim=1).sqrt()
        bad, max_abs, max_rel = partials[:3].amax(dim=1).double()
        return [float(v) for v in torch.stack([bad, max_abs, max_rel, sums[0], sums[1]]).tolist()]
    except Exception as exc:  # Triton missing or failing: PyTorch's pass decides
        if not error:
            error.append(f"{type(exc).__name__}: {exc}"[:500])
        return None


@functools.cache
def warm() -> None:
    """Compile (or load from Triton's cache) the kernel for the usual pairs of dtypes, launching
    nothing, once per process: a judge started ahead does this before its request, any other
    while its runners start, so that an evaluation does not pay the compile under the GPU lock."""
    import torch

    if os.environ.get(DISABLE_ENV) == "0" or not torch.cuda.is_available():
        return
    kinds = [torch.float16, torch.bfloat16, torch.float32]
    # Half the corpus' references are float64 (compared with their digits kept).
    pairs = [(out_dtype, ref_dtype) for out_dtype in kinds
             for ref_dtype in dict.fromkeys([out_dtype, torch.float32, torch.float64])]
    try:
        kernel = _kernel()
        for out_dtype, ref_dtype in pairs:
            wide = ref_dtype == torch.float64
            kernel.warmup(out_dtype, ref_dtype, BLOCK + 1, 0.0, 0.0, 1.0,
                          torch.float64 if wide else torch.float32, 2,
                          BLOCK=BLOCK, WIDE=wide, num_warps=8, grid=(1,))
    except Exception as exc:
        if not error:
            error.append(f"warm-up: {type(exc).__name__}: {exc}"[:500])
    try:  # the timed audits' flags
        flag_kernel = _flag_kernel()
        for out_dtype, ref_dtype in pairs:
            flag_kernel.warmup(out_dtype, ref_dtype, FLAG_BLOCK + 1, 0.0, 0.0, 1.0, math.inf,
                               torch.int8, BLOCK=FLAG_BLOCK, WIDE=ref_dtype == torch.float64,
                               num_warps=8, grid=(1,))
    except Exception as exc:
        if not error:
            error.append(f"audit flag warm-up: {type(exc).__name__}: {exc}"[:500])
