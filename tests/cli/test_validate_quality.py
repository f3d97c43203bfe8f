"""``aka validate``'s quality checks as a task author meets them: a task whose tolerance lets
zeros through is FAILed by really evaluating trivial candidates; static checks warn about
timeouts, held-out coverage and unfinished drafts; ``--report FILE`` keeps every check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aka_core.yamlio import dump_yaml, load_plain_yaml

Aka = Callable[..., tuple[int, str, str]]
MakeTask = Callable[..., Path]


@pytest.fixture
def aka(aka_cli: Aka) -> Aka:
    """``aka(*args) -> (exit status, stdout, stderr)``, in-process (``aka_cli``)."""
    return aka_cli


def checks_of(report_file: Path) -> dict[str, dict]:
    report = load_plain_yaml(report_file)["reports"][0]
    return {c["name"]: c for c in report["checks"]}


@pytest.mark.slow  # evaluations of several trivial candidates
def test_tolerance_so_loose_that_zeros_pass_fails_the_task(
    aka: Aka, make_task: MakeTask, tmp_path: Path
) -> None:
    task = make_task(tolerance={"float32": {"rtol": 0.5, "atol": 100.0}})
    report = tmp_path / "report.yaml"

    code, out, _ = aka("validate", task, "--run", "--device", "cpu", "--report", report)

    assert code == 1, out
    assert out.splitlines()[0].split() == ["FAIL", "demo/scale_add"]
    checks = checks_of(report)
    assert checks["baseline_matches_reference"]["status"] == "PASS"
    zeros = checks["trivial_candidate[zeros]"]
    assert zeros["status"] == "FAIL"
    assert "returns zeros" in zeros["detail"] and "passes the correctness check" in zeros["detail"]
    assert checks["trivial_candidate[first_input]"]["status"] == "FAIL"
    calibration = checks["tolerance_calibration"]
    assert calibration["status"] == "WARN" and "100x looser" in calibration["detail"]
    assert load_plain_yaml(report)["overall_status"] == "FAIL"


@pytest.mark.slow  # evaluations of several trivial candidates
def test_a_sound_task_passes_every_run_check(aka: Aka, make_task: MakeTask, tmp_path: Path
                                             ) -> None:
    task = make_task()
    report = tmp_path / "report.yaml"

    code, out, _ = aka("validate", task, "--run", "--device", "cpu", "--report", report)

    assert code == 0 and out.startswith("PASS"), out
    checks = checks_of(report)
    for name in ("hang_guard", "tolerance_calibration", "trivial_candidate[zeros]",
                 "trivial_candidate[first_input]"):
        assert checks[name]["status"] == "PASS", checks[name]
    assert "not evaluated: rules.torch_compute is allowed" in checks[
        "trivial_candidate[calls_reference]"]["detail"]


@pytest.mark.parametrize(("overrides", "name", "words"), [
    ({"timeouts": None}, "timeouts", "declares no compile_seconds"),
    ({"timeouts": {"compile_seconds": 60, "correctness_seconds": 86400, "timing_seconds": 60}},
     "timeouts", "correctness_seconds 86400 s outside 10-1800 s"),
    ({"held_out_cases": [{"name": "again", "params": {"M": 256, "N": 512, "dtype": "float32"}}]},
     "held_out_coverage", "again repeat a visible case's params"),
    ({"held_out_cases": None}, "held_out_coverage", "no held-out cases"),
    ({"held_out_cases": None, "held_out_draws": {"params": {"M": 256, "N": 512,
                                                           "dtype": "float32"}}},
     "held_out_coverage", "only reproduce a visible case"),
    ({"description": "TODO: describe it"}, "unfinished", "still say(s) TODO"),
])
def test_static_checks_warn_with_the_reason(
    aka: Aka, make_task: MakeTask, tmp_path: Path, overrides: dict, name: str, words: str
) -> None:
    task = make_task(**{k: v for k, v in overrides.items() if v is not None})
    data = load_plain_yaml(task / "task.yaml")
    for key in [k for k, v in overrides.items() if v is None]:  # None: leave the field out
        del data[key]
    (task / "task.yaml").write_text(dump_yaml(data), encoding="utf-8")
    report = tmp_path / "report.yaml"

    code, out, _ = aka("validate", task, "--report", report)

    assert code == 0, out
    check = checks_of(report)[name]
    assert check["status"] == "WARN" and words in check["detail"], check
    assert out.splitlines()[0].startswith("WARN")
