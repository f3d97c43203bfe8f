"""The evaluation record is typed where the core reads it, and task results written before it
was (``tests/core/stored_results``: real records of a CPU run, accepted and rejected, and one in
the shape the GPU judge writes) still load and are written back byte for byte."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import attrs
import pytest

from aka_core import yamlio
from aka_core.convert import structure, unstructure
from aka_core.evaluation import record as record_module
from aka_core.evaluation.failures import FailureKind
from aka_core.evaluation.record import (
    AuditedRuns,
    DeviceMemory,
    EvaluationRecord,
    EvaluatorIntegrity,
    Failure,
    GpuState,
    HarnessCommands,
    KernelCacheSave,
    PerformanceCase,
    RegretAllowance,
    ToolchainControl,
    TpotGate,
    WallClockCheck,
    WarmUse,
    as_record,
)
from aka_core.run.results import read_task_result, write_task_result

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
    assert accepted.confinement.baseline is not None and accepted.confinement.baseline.confined
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
    assert gpu.device.compute_capability == 9.0 and gpu.device.software == {
        "torch": "2.9.0+cu128", "triton": "3.5.0"}
    assert cases[0].interference is not None and cases[0].interference.ratio == 1.02
    assert cases[0].clean is not None and cases[0].clean.touch_windows_ms == [0.01, 0.01]
    assert cases[0].windows_ms == {"baseline": [2.1, 2.2], "candidate": [1.1, 1.2]}
    assert gpu.performance.gpu_state is not None and gpu.performance.gpu_state.start is not None
    assert gpu.performance.gpu_state.start.sm_mhz == 1980.0
    assert gpu.performance.gpu_state.end == GpuState(error="nvidia-smi is late")
    assert gpu.kernel_cache is not None and gpu.kernel_cache["baseline"].reason == "miss"
    ops = gpu.diagnostics.runner_ops if gpu.diagnostics is not None else None
    assert ops is not None and ops["candidate"]["call"].count == 4
    assert gpu.wall_clock_check == WallClockCheck(passed=True, blocks=80, note=gpu.wall_clock_check.note)
    assert gpu.device_memory == DeviceMemory(free_gib=138.5, total_gib=139.8, shared=False)
    assert wrong.correctness is not None and wrong.correctness.checks[0].run == 1


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_every_key_of_a_stored_record_has_a_field(path: Path) -> None:
    assert structure(_evaluation(path), EvaluationRecord).unknown_keys() == []


def test_a_part_set_later_is_written_after_the_keys_it_was_read_with() -> None:
    record = structure({"phases": {"compile": 1.0}, "a_plugins_own": {"x": 1}}, EvaluationRecord)
    record = attrs.evolve(record, evaluator_integrity=EvaluatorIntegrity(files=3, digest="d", unchanged=True))
    assert unstructure(record) == {
        "phases": {"compile": 1.0},
        "a_plugins_own": {"x": 1},
        "evaluator_integrity": {"files": 3, "digest": "d", "unchanged": True},
    }
    assert list(unstructure(record.without("a_plugins_own"))) == ["phases", "evaluator_integrity"]


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


# --------------------------------------------------------------------------- no Any in the types


def _record_classes() -> list[type]:
    return [c for c in vars(record_module).values()
            if isinstance(c, type) and c.__module__ == record_module.__name__ and attrs.has(c)]


def _mentions_any(hint: object) -> bool:
    return hint is typing.Any or any(_mentions_any(arg) for arg in typing.get_args(hint))


def test_no_public_field_or_method_of_a_record_class_is_typed_any() -> None:
    classes = _record_classes()
    assert EvaluationRecord in classes and len(classes) > 20
    offenders = []
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for field in attrs.fields(cls):
            if field.name.startswith("_"):
                continue
            if re.search(r"\bAny\b", str(field.type)) or _mentions_any(hints[field.name]):
                offenders.append(f"{cls.__name__}.{field.name}: {field.type}")
        for name, member in vars(cls).items():
            func = member.fget if isinstance(member, property) else member
            if name.startswith("_") or not callable(func):
                continue
            for what, annotation in getattr(func, "__annotations__", {}).items():
                if re.search(r"\bAny\b", str(annotation)):
                    offenders.append(f"{cls.__name__}.{name} ({what}): {annotation}")
    assert offenders == []


def test_the_check_finds_a_field_typed_any() -> None:
    @attrs.frozen
    class Loose:
        data: dict[str, typing.Any]

    assert _mentions_any(typing.get_type_hints(Loose)["data"])


# --------------------------------------------------------------------------- the parts, written and read


def _round_trip(data: dict) -> EvaluationRecord:
    """``data`` structured; it must be written back with the same keys, in the same order, and
    with every key in a field."""
    record = structure(data, EvaluationRecord)
    assert json.dumps(unstructure(record)) == json.dumps(data)
    assert record.unknown_keys() == []
    return record


def test_kernel_cache_records_as_the_store_writes_them(tmp_path: Path, monkeypatch) -> None:
    from aka_core.evaluation import kernel_cache

    monkeypatch.setenv(kernel_cache.ENV, str(tmp_path / "store"))
    built = tmp_path / "built"
    (built / "triton").mkdir(parents=True)
    (built / "triton" / "k.bin").write_bytes(b"x" * 10)
    miss = kernel_cache.restore("k" * 64, tmp_path / "cold")
    saved = kernel_cache.save("k" * 64, built, miss)
    hit = kernel_cache.restore("k" * 64, tmp_path / "warm")
    record = _round_trip({"kernel_cache": {
        "baseline": {"key": "k" * 16, **miss, "saved": saved},
        "candidate": {"key": "k" * 16, **hit,
                      "saved": kernel_cache.save("k" * 64, tmp_path / "warm", hit)},
        "reference": {"key": None, "used": False, "reason": "side folder not hashed"}}})
    assert record.kernel_cache is not None
    base, cand = record.kernel_cache["baseline"], record.kernel_cache["candidate"]
    assert (base.used, base.reason) == (False, "miss")
    assert base.saved is not None and base.saved.saved and base.saved.files == 1
    assert isinstance(base.saved.bytes, int) and base.saved.bytes == 10
    assert cand.used and cand.files == 1 and cand.bytes == 10
    assert cand.saved == KernelCacheSave(saved=False, reason="nothing new")
    assert record.kernel_cache["reference"].key is None


def test_gpu_state_as_nvidia_smi_gives_it_and_when_it_cannot() -> None:
    import subprocess

    from aka_core.evaluation import gpu_state

    def smi(args: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        assert "clocks_event_reasons.active" in args[1]  # everything in one run
        return subprocess.CompletedProcess(args, 0, "1980, 3201, 41, [N/A], 0x0000000000000001\n",
                                           "")

    start = gpu_state.read("GPU-1", run=smi)
    record = _round_trip({"performance": {"measured": True, "gpu_state": {
        "start": start, "end": {"error": "nvidia-smi is late"}}}})
    assert record.performance is not None and record.performance.gpu_state is not None
    assert record.performance.gpu_state.start == GpuState(
        sm_mhz=1980.0, memory_mhz=3201.0, temperature_c=41.0, power_w=None,
        clock_event_reasons="0x0000000000000001")
    assert record.performance.gpu_state.end == GpuState(error="nvidia-smi is late")


def test_warm_runners_and_the_judges_own_keys() -> None:
    record = _round_trip({
        "phases": {"startup": 1.5}, "warm": {"used": False, "reason": "device cpu"},
        "device_memory": {"free_gib": 80.0, "total_gib": 80.0, "shared": False},
        "compile": {"passed": True, "seconds": 0.5, "sides": {"candidate": {"registers": 32}}},
        "compile_only": {"architecture": "sm_90", "built": ["candidate"], "note": "n",
                         "sides": {"candidate": {"built": True}}},
        "failure": {"kind": "infra_error", "phase": "timing", "message": "m", "exit_code": -9,
                    "retryable": True},
        "cleanup_error": "OSError: gone",
        "diagnostics": {"runner_ops": {"baseline": {"init": {"count": 1, "round_trip_s": 0.5,
                                                             "busy_s": 0.1}}}}})
    assert record.warm == WarmUse(used=False, reason="device cpu")
    assert record.failure is not None and record.failure.exit_code == -9
    assert record.compile is not None and record.compile.sides == {"candidate": {"registers": 32}}
    assert record.cleanup_error == "OSError: gone"


def test_numbers_keep_their_type_and_a_wrong_one_does_not_load() -> None:
    record = _round_trip({"performance": {"measured": False, "gpu_lock_wait_s": 0, "cases": [
        {"case": "a", "estimate_ms": {"baseline": 1, "candidate": 0.5}, "seconds": 2}]}})
    assert record.performance is not None and record.performance.cases is not None
    case = record.performance.cases[0]
    assert case.estimate_ms == {"baseline": 1, "candidate": 0.5}
    assert type(case.seconds) is int and type(record.performance.gpu_lock_wait_s) is int
    with pytest.raises(Exception):  # noqa: B017 - cattrs' validation group or its cause
        as_record({"performance": {"measured": True, "gpu_lock_wait_s": "soon"}})
    with pytest.raises(Exception):  # noqa: B017
        as_record({"performance": {"measured": True, "gpu_lock_wait_s": True}})


def test_a_key_no_class_names_is_kept_in_its_parts_extra() -> None:
    data = {"kernel_cache": {"baseline": {"key": None, "used": False, "tier": "local"}},
            "e2e": {"engine": "builtin", "new_section": [1, 2]}}
    record = structure(data, EvaluationRecord)
    assert json.dumps(unstructure(record)) == json.dumps(data)
    assert record.unknown_keys() == ["kernel_cache.baseline.tier", "e2e.new_section"]
    assert record.kernel_cache is not None and record.kernel_cache["baseline"].extra == {
        "tier": "local"}


HARNESS_RECORD = {
    "trust": "harness", "trust_note": "harness-trusted", "phases": {"compile": 0.1},
    "harness": {"compile": ["make"], "correctness": ["python check.py"],
                "performance": ["python bench.py"], "report": "perf.json"},
    "confinement": {"policy": "required", "confined": True, "sides": {
        "candidate": {"landlock_abi": 7, "filesystem": "allowlist", "network": "namespace",
                      "capabilities": "all dropped", "scoped": ["signal"],
                      "max_file_bytes": 536870912, "confined": True}}},
    "steps": [{"side": "candidate", "phase": "compile", "command": "make", "exit": 0,
               "seconds": 0.1, "log": "harness-01-candidate-compile.log"},
              {"side": "candidate", "phase": "correctness", "command": "python check.py",
               "exit": None, "seconds": 30.0, "log": "harness-02-candidate-correctness.log"}],
    "compile": {"passed": True},
    "correctness": {"passed": True, "checks": [
        {"case": "harness", "command": "python check.py", "held_out": False}]},
    "performance": {"measured": True, "speedup": 2.0, "ci95": None, "method": ["harness"],
                    "description": "d", "cases": [
                        {"case": "harness", "baseline_median_ms": 2.0, "candidate_median_ms": 1.0,
                         "speedup": 2.0, "method": "harness"}]},
}


def test_a_harness_record_round_trips_typed() -> None:
    record = _round_trip(HARNESS_RECORD)
    assert record.harness == HarnessCommands(compile=["make"], correctness=["python check.py"],
                                             performance=["python bench.py"], report="perf.json")
    assert record.steps is not None and [s.exit for s in record.steps] == [0, None]
    assert record.confinement is not None and record.confinement.sides is not None
    assert record.confinement.sides["candidate"].network == "namespace"
    assert record.correctness is not None
    assert record.correctness.checks[0].command == "python check.py"


def _e2e_run(arm: str) -> dict:
    return {"arm": arm, "pair": 0, "position": 0, "throughput": 900.5, "duration_s": 0.2,
            "tokens": 24, "requests": 4, "ttft_ms": [1.5], "tpot_ms": [0.9, 1], "wall_start": 1.0}


REGRET = {"sequences": 4, "tokens": 24, "max_regret": 0.0, "mean_regret": 0.0,
          "max_logprob_error": None, "mismatches": 0}
AUDIT = {"sampled_per_run": 2, "baseline": {"runs": 1, "max_regret": 0.0, "mean_regret": 0.0},
         "candidate": {"runs": 1, "max_regret": 0.1, "mean_regret": 0.01},
         "allowance": {"max_regret": 1, "mean_regret": 0.05}}
TPOT = {"baseline_p99_ms": 1.0, "candidate_p99_ms": 0.9, "limit_ms": None, "passed": None}
E2E_RECORD = {
    "judge": "e2e", "phases": {"setup": 0.5, "compile": 1.0},
    "confinement": {"policy": "best_effort", "confined": False, "sides": {
        "baseline": {"confined": False, "reason": "switched off"}}},
    "e2e": {
        "arms": {"baseline": {"kernel_digest": "d1", "entrypoints_called": ["rms_norm"],
                              "log": "b.log"}},
        "engine": "builtin", "model": "tiny", "workload_digest": "w", "weights_digest": "x",
        "lock": "workload.lock matches", "entrypoints": ["rms_norm"],
        "editable": ["kernels/norm.py"], "correctness_seed": 7, "prompts": "secret",
        "added_files": [], "toolchain_control": {"passed": False, "message": "m"},
        "oracle": {"operator": {"baseline": {"rms_norm": 0.1}, "candidate": {"rms_norm": 0}},
                   "model": {"baseline": REGRET, "candidate": REGRET,
                             "allowance": {"max_regret": 1.0, "mean_regret": 0.05},
                             "prompts": 4, "output_len": 6}},
        "pairs": {"c2": [{"index": 0, "order": ["baseline", "candidate"], "ratio": 1.01,
                          "baseline": _e2e_run("baseline"), "candidate": _e2e_run("candidate")}]},
        "audits": {"c2": AUDIT},
        "tpot": {"c2": TPOT}},
    "device": {"kind": "cpu", "vendor": None, "name": None, "architecture": None,
               "compute_capability": None, "software": {"torch": "2.9.0"}},
    "compile": {"passed": True, "sides": {"baseline": {"kernel_digest": "d1", "load_s": 0.3}}},
    "correctness": {"passed": True, "checks": [
        {"case": "operator:rms_norm[a]", "passed": True, "worst": 0.1, "held_out": True},
        {"case": "model", "passed": True, "held_out": True, "max_regret": 0.0,
         "mean_regret": 0.0}]},
    "performance": {"measured": False, "cpu_diagnostic": {
        "speedup": 1.01, "ci95": [0.9, 1.1], "cases": [
            {"case": "c2", "baseline_median_ms": 1.1, "candidate_median_ms": 1.0, "speedup": 1.01,
             "ci95": [0.9, 1.1], "pairs": 1, "spread": 0.0, "aa_floor": 0.003, "aa_ratios": [],
             "stopped": "max_pairs", "p99_tpot": TPOT, "method": "e2e_throughput"}],
        "method": ["e2e_throughput"], "unit": "ms per output token", "description": "d"},
        "reason_not_measured": "no GPU"},
    "failure": {"kind": "correctness", "phase": "timing", "message": "m", "retryable": False,
                "audit": AUDIT, "arm": "candidate", "engine_phase": "generate",
                "entrypoint": "rms_norm"},
    "wall_clock_check": True,
}


def test_an_e2e_record_round_trips_typed() -> None:
    record = _round_trip(E2E_RECORD)
    e2e = record.e2e
    assert e2e is not None and e2e.arms is not None and e2e.oracle is not None
    assert e2e.arms["baseline"].entrypoints_called == ["rms_norm"]
    assert e2e.correctness_seed == 7 and e2e.toolchain_control == ToolchainControl(message="m")
    assert e2e.oracle.operator == {"baseline": {"rms_norm": 0.1}, "candidate": {"rms_norm": 0}}
    assert e2e.oracle.model is not None and e2e.oracle.model.allowance == RegretAllowance(
        max_regret=1.0, mean_regret=0.05)
    assert e2e.pairs is not None and e2e.pairs["c2"][0].candidate is not None
    assert e2e.pairs["c2"][0].candidate.tpot_ms == [0.9, 1]
    assert e2e.audits is not None and e2e.audits["c2"].allowance is not None
    assert e2e.audits["c2"].allowance.max_regret == 1  # as the workload wrote it: an int
    assert e2e.tpot == {"c2": TpotGate(baseline_p99_ms=1.0, candidate_p99_ms=0.9, limit_ms=None,
                                       passed=None)}
    perf = record.performance
    assert perf is not None and perf.cpu_diagnostic is not None
    assert perf.cpu_diagnostic.unit == "ms per output token"
    case = (perf.cpu_diagnostic.cases or [])[0]
    assert case.stopped == "max_pairs" and case.p99_tpot is not None
    assert record.failure is not None and record.failure.audit is not None
    assert record.failure.audit.candidate == AuditedRuns(runs=1, max_regret=0.1, mean_regret=0.01)
    assert record.wall_clock_check is True
    secret = _round_trip({**E2E_RECORD, "e2e": {"correctness_seed": "secret"}})
    assert secret.e2e is not None and secret.e2e.correctness_seed == "secret"
