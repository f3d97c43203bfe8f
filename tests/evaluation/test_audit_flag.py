"""The timed audits' one-launch flag (``fused_compare.audit_flag``) against PyTorch's exact flag
(``checking.failure_flag``), run on the CPU through Triton's interpreter: it is never lowered
where PyTorch's is raised, it stays lowered on outputs clearly within their bounds, and it is
raised on outputs at the bound (which PyTorch's flag then settles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import json
    import torch
    from aka_core.evaluation import checking, fused_compare
    from aka_core.models import Tolerance
    from tests.evaluation.comparison_cases import pairs

    SLACK = 1.0 - checking.QUICK_MARGIN
    BLOCK = fused_compare.FLAG_BLOCK
    gen = torch.Generator().manual_seed(7)
    rows = []

    def case(name, out, ref, tol):
        quick = fused_compare.launch_audit_flag(out, ref, tol.atol, tol.rtol, tol.max_rel_l2,
                                                SLACK)
        exact = checking.failure_flag(out, ref, tol)
        rows.append({"name": name, "quick": None if quick is None else bool(quick),
                     "exact": bool(exact), "error": fused_compare.error[:1]})

    tols = {"elementwise": Tolerance(rtol=1e-2, atol=1e-2),
            "with l2": Tolerance(rtol=1e-2, atol=1e-2, max_rel_l2=2e-2)}
    kinds = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
    for n in (1, 7, BLOCK - 1, BLOCK, BLOCK + 1, 1 << 16):
        for out_dtype in kinds:
            for ref_dtype in dict.fromkeys([out_dtype, torch.float32, torch.float64]):
                for tname, tol in tols.items():
                    tag = f"{n} {out_dtype} {ref_dtype} {tname}"
                    for name, out, ref in pairs(gen, n, out_dtype, ref_dtype, 1e-4):
                        case(f"{name} {tag}", out, ref, tol)

    # At the bound (atol + rtol*|ref|): clearly inside, inside but within the margin, outside.
    tol = tols["elementwise"]
    ref = torch.linspace(-4, 4, 3 * BLOCK + 5)
    bound = 1e-2 + 1e-2 * ref.abs()
    case("clearly inside", ref + bound * SLACK * 0.999, ref, tol)
    case("inside, within the margin", ref + bound * (1 - checking.QUICK_MARGIN / 4), ref, tol)
    case("just outside", ref + bound * 1.001, ref, tol)
    one = ref + bound * SLACK * 0.999
    one[BLOCK + 3] = ref[BLOCK + 3] + bound[BLOCK + 3] * 1.01  # one element, past the first chunk
    case("one just outside", one, ref, tol)
    # The relative-L2 bound: every element within its bound, the sum of squares past it.
    ref = torch.randn(1 << 16, generator=gen)
    spread = torch.sign(torch.randn(1 << 16, generator=gen))
    for name, scale in (("l2 clearly inside", 0.5), ("l2 outside", 2.0)):
        case(name, ref + spread * 2e-3 * scale * ref.norm() / (1 << 8), ref,
             Tolerance(rtol=1.0, atol=1.0, max_rel_l2=2e-3))
    case("zeros", torch.zeros(BLOCK + 9), torch.zeros(BLOCK + 9), tols["with l2"])
    case("zero reference, output off", torch.full((9,), 9e-3), torch.zeros(9), tols["with l2"])
    big = torch.full((BLOCK,), 3e30)
    case("squares overflow", big, big * (1 + 1e-4), Tolerance(rtol=1e-2, atol=1e-2))
    # The check a judge makes on its GPU before the kernel may judge audits, here on the CPU.
    checked = fused_compare.check_audit_flag(device="cpu")
    print(json.dumps({"rows": rows, "checked": checked, "error": fused_compare.error[:1]}))
''')


@pytest.fixture(scope="module")
def result() -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rows(result: dict) -> list[dict]:
    return result["rows"]


def test_the_kernel_passes_its_own_check(result: dict) -> None:
    assert result["checked"] is True, result["error"]


def test_the_kernel_ran_on_every_case(rows: list[dict]) -> None:
    assert len(rows) > 800
    assert all(row["quick"] is not None for row in rows), rows[0]["error"]


def test_never_lowered_where_pytorch_raises_it(rows: list[dict]) -> None:
    missed = [row["name"] for row in rows if row["exact"] and not row["quick"]]
    assert not missed, missed[:10]


def test_lowered_on_outputs_clearly_within_their_bounds(rows: list[dict]) -> None:
    flag = {row["name"]: row["quick"] for row in rows}
    closes = [row for row in rows if row["name"].startswith("close ")]
    assert closes and not any(row["quick"] for row in closes), [
        row["name"] for row in closes if row["quick"]][:10]
    for name in ("clearly inside", "l2 clearly inside", "zeros"):
        assert not flag[name], name
    # NaN and infinities where the reference has them are within it.
    for row in rows:
        if row["name"].startswith(("nan both", "inf both")):
            assert not row["quick"], row["name"]


def test_raised_at_the_bound_and_beyond(rows: list[dict]) -> None:
    by_name = {row["name"]: row for row in rows}
    margin = by_name["inside, within the margin"]
    assert margin["quick"] and not margin["exact"]  # raised, and PyTorch's flag settles it
    for name in ("just outside", "one just outside", "l2 outside", "zero reference, output off"):
        assert by_name[name]["quick"] and by_name[name]["exact"], name
    assert by_name["squares overflow"]["quick"]  # norms that overflow say nothing: raised
    for row in rows:
        if row["name"].startswith(("one far", "nan out", "nan ref", "inf out", "inf signs")):
            assert row["quick"] and row["exact"], row["name"]


# --------------------------------------------------------------- the check, with the kernel faked


@pytest.fixture
def fresh_check(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A process whose kernel has not been checked yet (its errors collected apart)."""
    from aka_core.evaluation import fused_compare

    errors: list[str] = []
    monkeypatch.setattr(fused_compare, "flag_checked", {})
    monkeypatch.setattr(fused_compare, "error", errors)
    return errors


def faked_kernel(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[int]:
    """``launch_audit_flag`` replaced: ``answer(out, ref, max_rel_l2)`` gives each flag (None: the
    launch failed)."""
    import torch

    from aka_core.evaluation import fused_compare

    launches: list[int] = []

    def launch(out: Any, ref: Any, atol: float, rtol: float, l2: float | None,
               slack: float) -> Any:
        launches.append(1)
        value = answer(out, ref, l2)
        return None if value is None else torch.tensor(bool(value))

    monkeypatch.setattr(fused_compare, "launch_audit_flag", launch)
    return launches


def test_a_kernel_that_lowers_every_flag_is_not_used(monkeypatch: pytest.MonkeyPatch,
                                                     fresh_check: list[str]) -> None:
    from aka_core.evaluation import fused_compare

    faked_kernel(monkeypatch, lambda out, ref, l2: False)
    assert fused_compare.check_audit_flag(device="cpu") is False
    # Named: the cases whose flag must be raised (the lowered ones were right).
    assert "wrong on its own check (one far, a NaN, L2 broken, fp16 one far, float64 ref)" in (
        fresh_check[0])
    assert fused_compare.flag_checked == {"passed": False}


def test_a_kernel_that_fails_to_launch_is_not_used(monkeypatch: pytest.MonkeyPatch,
                                                   fresh_check: list[str]) -> None:
    from aka_core.evaluation import fused_compare

    faked_kernel(monkeypatch, lambda out, ref, l2: None)
    assert fused_compare.check_audit_flag(device="cpu") is False


def test_the_check_runs_once_per_process(monkeypatch: pytest.MonkeyPatch,
                                         fresh_check: list[str]) -> None:
    import torch

    from aka_core.evaluation import checking, fused_compare
    from aka_core.models import Tolerance

    def exact(out: Any, ref: Any, l2: float | None) -> bool:  # PyTorch's verdict
        tol = Tolerance(rtol=1e-2, atol=1e-2, max_rel_l2=l2)
        return bool(checking.failure_flag(out, ref, tol))

    launches = faked_kernel(monkeypatch, exact)
    assert fused_compare.check_audit_flag(device="cpu") is True
    count = len(launches)
    assert fused_compare.check_audit_flag(device="cpu") is True and len(launches) == count
    assert not fresh_check
    # Checked, the kernel is asked for GPU outputs only: on the CPU, PyTorch's flags stand.
    assert fused_compare.audit_flag(torch.zeros(4), torch.zeros(4), 1e-2, 1e-2, None, 1.0) is None
    assert len(launches) == count


def test_unchecked_the_kernel_judges_nothing(monkeypatch: pytest.MonkeyPatch,
                                            fresh_check: list[str]) -> None:
    from aka_core.evaluation import fused_compare

    class GpuTensor:  # what audit_flag looks at before it launches anything
        device = type("Device", (), {"type": "cuda"})()
        shape = (4,)
        dtype = "torch.float32"

        def numel(self) -> int:
            return 4

    launches = faked_kernel(monkeypatch, lambda out, ref, l2: False)
    assert fused_compare.audit_flag(GpuTensor(), GpuTensor(), 1e-2, 1e-2, None, 1.0) is None
    assert not launches
    fused_compare.flag_checked["passed"] = True  # checked: now it launches
    assert fused_compare.audit_flag(GpuTensor(), GpuTensor(), 1e-2, 1e-2, None, 1.0) is not None
    assert launches == [1]
