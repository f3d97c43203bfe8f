"""The evaluation record is typed where the core reads it, and task results written before it
was (``tests/core/stored_results``: real records of a CPU run, accepted and rejected, and one in
the shape the GPU judge writes) still load and are written back byte for byte."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from aka_core import yamlio
from aka_core.convert import structure, unstructure
from aka_core.evaluation.record import (
    EvaluationRecord,
    EvaluatorIntegrity,
    Failure,
    PerformanceCase,
    as_record,
)
from aka_core.failures import FailureKind
from aka_core.results import read_task_result, write_task_result

STORED = sorted((Path(__file__).parent / "stored_results").glob("*.yaml"))


def _evaluation(path: Path) -> dict:
    return yamlio.load_plain_yaml(path)["evaluation"]


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_a_stored_record_is_written_back_as_it_was(path: Path) -> None:
    data = _evaluation(path)
    record = structure(data, EvaluationRecord)
    assert yamlio.dump_yaml(unstructure(record)) == yamlio.dump_yaml(data)


def test_the_stored_records_are_read_into_their_types() -> None:
    by_name = {p.stem: structure(_evaluation(p), EvaluationRecord) for p in STORED}
    accepted, wrong, gpu = by_name["cpu_accepted"], by_name["cpu_wrong_output"], by_name["gpu_measured"]
    assert accepted.failure is None and accepted.correctness is not None
    assert accepted.correctness.passed and len(accepted.correctness.checks) == 3
    assert accepted.performance is not None and not accepted.performance.measured
    assert accepted.confinement is not None and accepted.confinement.confined
    assert "baseline" in accepted.confinement.extra  # a side's own record, kept as it came
    assert wrong.failure == Failure(
        kind=FailureKind.CORRECTNESS,
        message=wrong.failure.message,
        phase="correctness",
        case="tiny",
        retryable=False,
    )
    assert gpu.performance is not None and gpu.performance.measured
    cases = gpu.performance.cases or []
    assert [c.case for c in cases] == ["large", "held_out_1"]
    assert cases[0].samples_ms is not None and cases[0].samples_ms.candidate == [0.011, 0.012]
    assert cases[0].times() == (0.0215, 0.0115, 0.004)
    assert cases[1].times() == (0.0215, 0.0115, None)  # no speed of light recorded
    assert gpu.device is not None and gpu.device.name == "NVIDIA H200"


def test_a_part_set_later_is_written_after_the_keys_it_was_read_with() -> None:
    record = structure({"phases": {"compile": 1.0}, "kernel_cache": {"x": 1}}, EvaluationRecord)
    record = attrs.evolve(record, evaluator_integrity=EvaluatorIntegrity(files=3, digest="d", unchanged=True))
    assert unstructure(record) == {
        "phases": {"compile": 1.0},
        "kernel_cache": {"x": 1},
        "evaluator_integrity": {"files": 3, "digest": "d", "unchanged": True},
    }
    assert list(unstructure(record.without("kernel_cache"))) == ["phases", "evaluator_integrity"]


def test_a_null_that_was_read_is_written_back_and_one_never_set_is_not() -> None:
    record = structure({"kind": "crashed", "file": None}, Failure)
    assert unstructure(record) == {"kind": "crashed", "file": None}
    assert unstructure(Failure(kind=FailureKind.CRASHED)) == {"kind": "crashed", "message": ""}


def test_a_malformed_record_does_not_load() -> None:
    with pytest.raises(Exception):  # noqa: B017 - cattrs' validation group or its cause
        as_record({"failure": {"kind": "not-a-kind", "message": "m"}})
    with pytest.raises(Exception):  # noqa: B017
        as_record({"performance": {"measured": True, "cases": [{"speedup": 1.0}]}})  # no case


def test_case_times_leave_out_what_is_not_a_positive_time() -> None:
    assert PerformanceCase(case="a", baseline_median_ms=0.0, candidate_median_ms=1.0).times() is None
    assert PerformanceCase(case="a", baseline_median_ms=1.0, candidate_median_ms=float("nan")).times() is None
    assert PerformanceCase(
        case="a", baseline_median_ms=1.0, candidate_median_ms=2.0, speed_of_light_ms=-1.0
    ).times() == (1.0, 2.0, None)


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_a_stored_task_result_loads_typed_and_is_written_back_byte_for_byte(
    path: Path, tmp_path: Path
) -> None:
    result = read_task_result(path)
    assert isinstance(result.evaluation, EvaluationRecord)
    assert write_task_result(tmp_path, result).read_bytes() == path.read_bytes()
