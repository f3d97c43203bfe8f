"""The quick pass's one-kernel comparison (``fused_compare``) against the PyTorch pass it stands in
for: the same verdict and the same figures on every kind of output a candidate can return (NaN
and infinities where the reference has them or not, errors at the bound, sizes around the block,
16-, 32- and 64-bit floats), run on the CPU through Triton's interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import json, math
    import torch
    from aka_core.evaluation import checking, fused_compare
    from aka_core.models import Tolerance
    from tests.evaluation.comparison_cases import pairs

    BLOCK = fused_compare.BLOCK
    gen = torch.Generator().manual_seed(5)
    rows = []

    def case(name, out, ref, tol):
        slack = 1.0 - checking.QUICK_MARGIN
        fused = fused_compare.figures(out, ref, tol.atol, tol.rtol, slack)
        torch_path = checking._quick_figures(out, ref, tol, slack)
        rows.append({"name": name, "fused": fused, "torch": torch_path,
                     "error": fused_compare.error[:1]})

    tol = Tolerance(rtol=1e-2, atol=1e-2)
    kinds = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
    for n in (1, 7, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17):
        for out_dtype in kinds:
            # float64 references (half the corpus') are compared in float64 arithmetic.
            for ref_dtype in dict.fromkeys([out_dtype, torch.float32, torch.float64]):
                tag = f"{n} {out_dtype} {ref_dtype}"
                for name, out, ref in pairs(gen, n, out_dtype, ref_dtype, 1e-3):
                    case(f"{name} {tag}", out, ref, tol)

    # At the bound: errors just inside and just outside (atol + rtol*|ref|) * slack.
    ref = torch.linspace(-4, 4, 3 * BLOCK + 5)
    bound = (1e-2 + 1e-2 * ref.abs()) * (1.0 - checking.QUICK_MARGIN)
    case("just inside", ref + bound * 0.999, ref, tol)
    case("just outside", ref + bound * 1.001, ref, tol)
    one = ref + bound * 0.999
    one[BLOCK + 3] = ref[BLOCK + 3] + bound[BLOCK + 3] * 1.01  # one element, in the second block
    case("one just outside", one, ref, tol)
    # A relative-L2 bound, zeros, a non-contiguous reference, overflowing squares.
    case("zeros", torch.zeros(BLOCK + 9), torch.zeros(BLOCK + 9), tol)
    mat = torch.randn(64, 96, generator=gen)
    case("transposed ref", mat.t().contiguous(), mat.t(), tol)
    big = torch.full((BLOCK,), 3e30)
    case("huge", big, big * (1 + 1e-4), Tolerance(rtol=1e-2, atol=0.0))
    # A float32 output against a float64 reference at a tight bound: the reference's digits
    # beyond float32 decide (rounded to float32 first, "just outside" would read as inside).
    ref64 = torch.linspace(1, 2, BLOCK + 3, dtype=torch.float64)
    bound64 = (1e-7 + 1e-5 * ref64.abs()) * (1.0 - checking.QUICK_MARGIN)
    tight = Tolerance(rtol=1e-5, atol=1e-7)
    case("float64 ref, just inside", (ref64 + bound64 * 0.99).float(), ref64, tight)
    case("float64 ref, just outside", (ref64 + bound64 * 1.5).float(), ref64, tight)
    # The reference rounded to float32 is the output: within a bound finer than float32's digits
    # in float32 arithmetic, outside it in float64's (the verdict the PyTorch pass gives).
    case("float64 ref, finer than float32", ref64.float(), ref64, Tolerance(rtol=1e-9, atol=1e-12))
    print(json.dumps(rows))
''')


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _close(a: float, b: float) -> bool:
    import math

    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b)) + 1e-12


def test_the_kernel_ran_on_every_case(rows: list[dict]) -> None:
    assert len(rows) > 400
    assert any("float64" in row["name"] for row in rows)
    assert all(row["fused"] is not None for row in rows), rows[0]["error"]


def test_the_same_verdict_as_pytorch_on_every_case(rows: list[dict]) -> None:
    for row in rows:
        assert bool(row["fused"][0]) == bool(row["torch"][0]), row["name"]
    finer = next(row for row in rows if row["name"] == "float64 ref, finer than float32")
    assert finer["torch"][0]  # the case does tell float64 arithmetic from float32


def test_the_same_figures_as_pytorch_where_both_pass(rows: list[dict]) -> None:
    for row in rows:
        if row["torch"][0]:
            continue
        for name, a, b in zip(("max_abs", "max_rel", "err_norm", "ref_norm"),
                              row["fused"][1:], row["torch"][1:], strict=True):
            # PyTorch's float32 norm of 3e30s overflows (inf); the kernel's float64 sum does not.
            if row["name"] == "huge" and name.endswith("norm"):
                continue
            assert _close(a, b), (row["name"], name, a, b)


def test_what_must_fail_fails(rows: list[dict]) -> None:
    verdict = {row["name"]: bool(row["fused"][0]) for row in rows}
    assert not verdict["just inside"] and verdict["just outside"]
    assert verdict["one just outside"]
    for name, bad in verdict.items():
        if name.startswith(("one far", "nan out", "nan ref", "inf out", "inf signs")):
            assert bad, name
        if name.startswith(("close", "nan both", "inf both")):
            assert not bad, name


def test_the_quick_pass_sends_overflowing_norms_to_the_float64_comparison() -> None:
    """A reference whose squares overflow float32 gives no L2 figure a quick pass may trust: the
    exact comparison decides (and passes it: every element is within its bound)."""
    import torch

    from aka_core.evaluation import checking
    from aka_core.models import Tolerance

    big = torch.full((1000,), 3e30)
    tol = Tolerance(rtol=1e-2, atol=0.0, max_rel_l2=1e-2)
    assert checking.quick_pass(big, big * (1 + 1e-4), tol) is None
    assert checking.compare(big, big * (1 + 1e-4), tol)["passed"]


def test_off_the_gpu_or_off_by_name_the_pytorch_pass_decides(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    import torch

    from aka_core.evaluation import fused_compare

    x = torch.ones(8)
    assert not fused_compare.applies(x, x)  # a CPU tensor
    monkeypatch.setenv(fused_compare.DISABLE_ENV, "0")
    assert not fused_compare.applies(x, x)


def test_a_tolerance_without_an_absolute_part_is_left_to_pytorch(monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """Exact floats (atol 0): a flushed denormal could hide a difference, so the kernel is not
    asked even where it applies."""
    import torch

    from aka_core.evaluation import checking, fused_compare
    from aka_core.models import Tolerance

    asked: list[float] = []
    monkeypatch.setattr(fused_compare, "applies", lambda out, ref: True)
    monkeypatch.setattr(fused_compare, "figures",
                        lambda out, ref, atol, rtol, slack: asked.append(atol) or None)
    x = torch.ones(16)
    assert checking.quick_pass(x, x, Tolerance(rtol=0.0, atol=0.0)) is not None
    assert asked == []
    assert checking.quick_pass(x, x, Tolerance(rtol=1e-3, atol=1e-5)) is not None
    assert asked == [1e-5]  # asked, answered None: PyTorch's pass decided


def test_the_switch_reaches_the_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    """``AKA_FUSED_COMPARE=0`` set where aka runs (an `aka serve`, an `aka run`) must reach the
    judge's process, whose environment is filtered."""
    from aka_core.evaluation import evaluate, fused_compare

    monkeypatch.setenv(fused_compare.DISABLE_ENV, "0")
    assert evaluate.worker_base_environment()[fused_compare.DISABLE_ENV] == "0"


def test_warm_compiles_each_usual_pair_once_and_never_raises(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    import torch

    from aka_core.evaluation import fused_compare

    compiled: list[tuple[object, object]] = []

    class Kernel:
        def warmup(self, out_dtype: object, ref_dtype: object, *args: object, **kwargs: object
                   ) -> None:
            assert kwargs["grid"] == (1,) and kwargs["BLOCK"] == fused_compare.BLOCK
            # float64 arithmetic (and float64 partial sums) exactly where a side is float64
            assert kwargs["WIDE"] == (torch.float64 in (out_dtype, ref_dtype))
            assert (args[4] == torch.float64) == kwargs["WIDE"]
            compiled.append((out_dtype, ref_dtype))

    flags: list[tuple[object, object, object]] = []

    class FlagKernel:
        def warmup(self, out_dtype: object, ref_dtype: object, *args: object, **kwargs: object
                   ) -> None:
            assert kwargs["grid"] == (1,) and kwargs["BLOCK"] == fused_compare.FLAG_BLOCK
            assert kwargs["WIDE"] == (torch.float64 in (out_dtype, ref_dtype))
            assert args[5] == torch.int8  # the flag, written as a byte
            flags.append((out_dtype, ref_dtype))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(fused_compare, "_kernel", lambda: Kernel())
    monkeypatch.setattr(fused_compare, "_flag_kernel", lambda: FlagKernel())
    monkeypatch.setattr(fused_compare, "error", [])
    fused_compare.warm.cache_clear()
    fused_compare.warm()
    assert len(compiled) == len(set(compiled)) == 8
    assert (torch.bfloat16, torch.float32) in compiled and (torch.float32, torch.float32) in compiled
    assert (torch.float16, torch.float64) in compiled and (torch.float32, torch.float64) in compiled
    # The audits' flag: every pair (a relative-L2 bound or none is an argument, not a variant).
    assert flags == compiled
    assert not fused_compare.error

    class Broken:
        def warmup(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("no ptxas")

    monkeypatch.setattr(fused_compare, "_kernel", lambda: Broken())
    flags.clear()
    fused_compare.warm.cache_clear()
    fused_compare.warm()  # a judge must start whatever Triton does
    assert fused_compare.error and "no ptxas" in fused_compare.error[0]
    assert len(flags) == 8, "one kernel that fails does not keep the other from compiling"
