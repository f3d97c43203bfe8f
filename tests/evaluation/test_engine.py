"""The measurement engine on the CPU: a real judge and real runners judging (mis)behaving candidates.

Each test writes a candidate ``kernel.py`` for the ``make_task`` test task (``x + alpha * y``,
python backend) and evaluates it with ``evaluate.evaluate``, as the lifecycle does. No GPU is used:
performance is never measured here, only build, correctness and isolation. Tests that need to see
what the candidate saw (its inputs, its environment, its children) switch confinement off, since a
confined candidate cannot write to the test's folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aka_core.evaluation import evaluate
from aka_core.evaluation.record import as_record
from aka_core.evaluation.request import EvaluationRequest, SideRef
from aka_core.models import Case, Timeouts, Tolerance

CASE = "m8_n16_fp32"
"""The one case these requests run; failure messages must name it."""

CORRECT = """\
import torch


def scale_add(x, y, alpha):
    return torch.add(x, y, alpha=alpha)
"""

EvaluateSource = Callable[..., dict[str, Any]]


def make_request(task_dir: Path, candidate_dir: Path, *, seeds: int,
                 timeouts: Timeouts | None, confinement: str = "required") -> EvaluationRequest:
    """The ``make_task`` task's reference, inputs and baseline; one small case."""
    root = str(task_dir)
    return EvaluationRequest(
        task_id="demo/scale_add", backend="python",
        reference=SideRef(root=root, ref="reference.py:scale_add_reference"),
        inputs=SideRef(root=root, ref="inputs.py:make_inputs"),
        baseline=SideRef(root=root, ref="kernel.py:scale_add"),
        candidate=SideRef(root=str(candidate_dir), ref="kernel.py:scale_add"),
        cases=(Case(name=CASE, params={"M": 8, "N": 16, "dtype": "float32"}),),
        tolerance={"float32": Tolerance(rtol=1e-5, atol=1e-6)},
        device="cpu", seeds_per_case=seeds,
        timeouts=timeouts or Timeouts(compile_seconds=60, correctness_seconds=60,
                                      timing_seconds=60),
        confinement=confinement, protected=(str(task_dir),),  # type: ignore[arg-type]
    )


@pytest.fixture
def evaluate_source(make_task: Callable[..., Path], tmp_path: Path) -> EvaluateSource:
    """``evaluate_source(kernel_py, seeds=2, timeouts=None) -> record`` (with ``gates`` added)."""
    task_dir = make_task()
    count = 0

    def run(source: str, *, seeds: int = 2, timeouts: Timeouts | None = None,
            confinement: str = "required") -> dict[str, Any]:
        nonlocal count
        count += 1
        candidate = tmp_path / f"candidate{count}"
        candidate.mkdir()
        (candidate / "kernel.py").write_text(textwrap.dedent(source), encoding="utf-8")
        request = make_request(task_dir, candidate, seeds=seeds, timeouts=timeouts,
                               confinement=confinement)
        record = evaluate.evaluate(request, log_path=tmp_path / f"candidate{count}.log")
        record["gates"] = evaluate.outcome(as_record(record))
        return record

    return run


def gates(record: dict[str, Any]) -> tuple[Any, Any]:
    return record["gates"].pass_compilation, record["gates"].pass_correctness


def process_gone(pid: int, within: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    deadline = time.monotonic() + within
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


# --------------------------------------------------------------------------- verdicts


def test_correct_candidate_passes_every_seed(evaluate_source: EvaluateSource) -> None:
    record = evaluate_source(CORRECT, seeds=3)

    assert "failure" not in record, record.get("failure")
    assert gates(record) == (True, True)
    checks = record["correctness"]["checks"]
    assert [(c["case"], c["seed_index"], c["passed"]) for c in checks] == [
        (CASE, 0, True), (CASE, 1, True), (CASE, 2, True)]
    perf = record["performance"]
    assert perf["measured"] is False and "no GPU" in perf["reason_not_measured"]
    assert record["gates"].performance_measured is False and record["gates"].speedup is None


WRONG = {
    "wrong_values": ("return x + alpha * y + 1e-3",
                     [f"output differs from the reference on case {CASE}", "elements outside"]),
    "wrong_dtype": ("return (x + alpha * y).double()",
                    ["dtype torch.float64, expected torch.float32", f"(case {CASE})"]),
    "wrong_shape": ("return (x + alpha * y).reshape(-1)",
                    ["shape (128,), expected (8, 16)", f"(case {CASE})"]),
    "nan_where_reference_has_none": (
        "out = x + alpha * y\n    out[3, 5] = float('nan')\n    return out",
        ["NaN mismatch: 1 unexpected NaN", f"case {CASE}"]),
    "mutates_its_inputs": ("out = x + alpha * y\n    x.zero_()\n    return out",
                           ["candidate modified its inputs x", f"(case {CASE})"]),
    "raises_not_implemented": ("raise NotImplementedError('write me')",
                               ["candidate raised NotImplementedError: write me", f"(case {CASE})"]),
    "raises_system_exit": ("raise SystemExit(0)", ["candidate raised SystemExit", f"(case {CASE})"]),
}


@pytest.mark.parametrize("body, fragments", list(WRONG.values()), ids=list(WRONG))
def test_wrong_candidate_compiles_but_fails_correctness_naming_the_case(
    evaluate_source: EvaluateSource, body: str, fragments: list[str]
) -> None:
    record = evaluate_source(f"def scale_add(x, y, alpha):\n    {body}\n")

    failure = record["failure"]
    assert (failure["kind"], failure["phase"]) == ("correctness", "correctness"), failure
    for fragment in fragments:
        assert fragment in failure["message"]
    assert gates(record) == (True, False)
    assert record["correctness"]["passed"] is False


def test_syntax_error_is_a_compile_failure_with_file_and_line(
    evaluate_source: EvaluateSource,
) -> None:
    record = evaluate_source("import torch\n\n\ndef scale_add(x, y, alpha:\n    return x\n")

    failure = record["failure"]
    assert (failure["kind"], failure["phase"]) == ("compile", "compile"), failure
    assert (failure["file"], failure["line"]) == ("kernel.py", 4)
    assert "SyntaxError" in failure["message"]
    assert gates(record) == (False, None)


def test_cached_results_fail_because_every_seed_gets_fresh_inputs(
    evaluate_source: EvaluateSource,
) -> None:
    record = evaluate_source("""\
        _cache = []


        def scale_add(x, y, alpha):
            if not _cache:
                _cache.append(x + alpha * y)
            return _cache[0].clone()
        """, seeds=2)

    failure = record["failure"]
    assert failure["kind"] == "correctness"
    assert f"differs from the reference on case {CASE}" in failure["message"]
    checks = record["correctness"]["checks"]
    assert [(c["seed_index"], c["passed"]) for c in checks] == [(0, True), (1, False)]
    assert gates(record) == (True, False)


@pytest.mark.slow  # 10-17 s: the fast tier stays under 3 minutes
def test_inputs_differ_between_seeds_and_between_evaluations(
    evaluate_source: EvaluateSource, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.jsonl"
    source = f"""\
        import json


        def scale_add(x, y, alpha):
            with open({str(seen)!r}, "a") as f:
                f.write(json.dumps([float(x.sum()), float(y.sum())]) + "\\n")
            return x + alpha * y
        """
    first = evaluate_source(source, seeds=3, confinement="off")
    n_first = len(seen.read_text().splitlines())
    second = evaluate_source(source, seeds=3, confinement="off")

    assert gates(first) == gates(second) == (True, True)
    calls = [tuple(json.loads(line)) for line in seen.read_text().splitlines()]
    first_inputs, second_inputs = set(calls[:n_first]), set(calls[n_first:])
    assert len(first_inputs) == 3, "each of the 3 seeds must give different inputs"
    assert len(second_inputs) == 3
    assert not first_inputs & second_inputs, "a new evaluation must draw new secret inputs"


# --------------------------------------------------------------------------- isolation


class TestIsolation:
    """A class of its own: the fast tier (``--dist loadscope``) runs it beside the rest of
    this module, on another worker."""

    @staticmethod
    def test_candidate_that_aborts_crashes_its_runner_only(evaluate_source: EvaluateSource) -> None:
        record = evaluate_source("import os\n\n\ndef scale_add(x, y, alpha):\n    os.abort()\n")

        failure = record["failure"]
        assert (failure["kind"], failure["phase"]) == ("crashed", "correctness"), failure
        assert "SIGABRT" in failure["message"]
        assert gates(record) == (True, False)


    @staticmethod
    def test_hanging_candidate_is_killed_at_the_phase_timeout_with_its_children(
        evaluate_source: EvaluateSource, tmp_path: Path
    ) -> None:
        pids = tmp_path / "pids.json"
        started = time.monotonic()
        record = evaluate_source(f"""\
            import json
            import os
            import subprocess
            import time


            def scale_add(x, y, alpha):
                child = subprocess.Popen(["sleep", "600"])
                with open({str(pids)!r}, "w") as f:
                    json.dump({{"runner": os.getpid(), "child": child.pid}}, f)
                time.sleep(600)
            """, timeouts=Timeouts(compile_seconds=60, correctness_seconds=3, timing_seconds=60),
            confinement="off")
        elapsed = time.monotonic() - started

        failure = record["failure"]
        assert (failure["kind"], failure["phase"]) == ("timeout", "correctness"), failure
        assert "limit of 3 s" in failure["message"]
        assert gates(record) == (True, False)
        assert elapsed < 60, "the parent must not wait for the candidate"
        spawned = json.loads(pids.read_text())
        try:
            assert process_gone(spawned["runner"]), "the runner survived its timeout"
            assert process_gone(spawned["child"]), "a child of the runner survived the timeout"
        finally:  # never leave the test's own sleepers behind, even when the engine failed
            for pid in spawned.values():
                if not process_gone(pid, within=0):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)


    @staticmethod
    def test_junk_on_stdout_and_stderr_does_not_break_the_protocol(
        evaluate_source: EvaluateSource, tmp_path: Path
    ) -> None:
        fake = json.dumps({"event": "result", "result": {"correctness": {"passed": False}}})
        record = evaluate_source(f"""\
            import os
            import sys

            print({fake!r})
            print('{{"event": "phase", "phase": "done"}}')


            def scale_add(x, y, alpha):
                print({fake!r})
                print("junk " * 5000)
                sys.stderr.write('{{"event": "result"\\n')
                os.write(1, b"\\xff\\xfe binary junk without a newline")
                os.write(2, b"\\x00\\x01\\x02")
                return x + alpha * y
            """)

        assert "failure" not in record, record.get("failure")
        assert gates(record) == (True, True)
        assert len(record["correctness"]["checks"]) == 2
        log = Path(record["logs"]["candidate"]).read_bytes() if "logs" in record else Path(
            record["worker_log"]).with_suffix(".candidate.log").read_bytes()
        assert b"binary junk" in log, "the candidate's output belongs in its runner's log"


    @staticmethod
    def test_secret_seed_and_credentials_are_not_in_the_runners_environment_or_argv(
        evaluate_source: EvaluateSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        secret = 0x2F1E3D4C5B6A7988
        monkeypatch.setattr(evaluate.secrets, "randbits", lambda bits: secret)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-reach-the-candidate")
        dump = tmp_path / "seen_by_candidate.json"
        record = evaluate_source(f"""\
            import json
            import os
            import sys


            def scale_add(x, y, alpha):
                with open("/proc/self/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
                with open({str(dump)!r}, "w") as f:
                    json.dump({{"environ": dict(os.environ), "argv": sys.argv, "cmdline": cmdline,
                               "cwd_files": os.listdir(".")}}, f)
                return x + alpha * y
            """, confinement="off")

        assert gates(record) == (True, True)
        seen = dump.read_text()
        assert json.loads(seen)["argv"], "the dump is empty: the candidate did not run"
        assert "sk-test-must-not-reach-the-candidate" not in seen, "credentials reach the candidate"
        for form in (str(secret), hex(secret), hex(secret)[2:]):
            assert form not in seen, f"the candidate can read the secret seed ({form})"
            assert form not in json.dumps(record, default=str), "the secret is in the record"
            for log in Path(record["worker_log"]).parent.glob("*.log"):
                assert form not in log.read_text(errors="replace"), f"the secret is in {log.name}"


# --------------------------------------------------------------------------- the task's own faults


@pytest.mark.parametrize(("inputs_py", "fragment"), [
    ("def make_inputs(case, seed, device):\n    while True:\n        pass\n",
     "the inputs factory did not return within"),
    ("import torch\n\ndef make_inputs(case, seed, device):\n    return [torch.ones(2)]\n",
     "the inputs factory returned a list"),
    ("def make_inputs(case, seed, device):\n    return {'n': case['K']}\n",
     "needs parameter 'K', which case m8_n16_fp32 does not set (its params: M, N, dtype)"),
])
def test_a_fault_of_the_tasks_own_code_is_a_task_error_not_the_candidates(
    make_task: Callable[..., Path], tmp_path: Path, inputs_py: str, fragment: str,
) -> None:
    task_dir = make_task()
    (task_dir / "inputs.py").write_text(inputs_py, encoding="utf-8")
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(CORRECT, encoding="utf-8")
    # A call of the task's code may take what is left of the phase (3 s here), at most
    # judge.TASK_CODE_SECONDS.
    request = make_request(task_dir, candidate, seeds=1,
                           timeouts=Timeouts(compile_seconds=3, correctness_seconds=3,
                                         timing_seconds=3))
    started = time.monotonic()
    record = evaluate.evaluate(request, log_path=tmp_path / "eval.log")
    failure = record["failure"]
    assert failure["kind"] == "task_error", failure
    assert fragment in failure["message"], failure["message"]
    assert time.monotonic() - started < 60


MARKED = """\
import os
from pathlib import Path

import torch

# {tag}
_marker = Path(os.environ["XDG_CACHE_HOME"]) / "triton" / "seen-before"
_seen = _marker.exists()
_marker.parent.mkdir(parents=True, exist_ok=True)
_marker.write_text("x")


def scale_add(x, y, alpha):
    return torch.add(x, y, alpha=alpha) * (0 if _seen else 1)
"""


@pytest.mark.slow  # four evaluations
def test_a_sides_compiled_kernels_return_to_the_same_files_only(
        evaluate_source: EvaluateSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a runner left in its private cache comes back to the next evaluation of byte-identical
    files of the same side (compiled kernels are not rebuilt), and never to other files."""
    from aka_core.evaluation import sandbox

    if sandbox.landlock_abi() <= 0:
        pytest.skip("the store is used for confined runners only; this kernel has no Landlock")
    monkeypatch.setenv("AKA_KERNEL_CACHE", str(tmp_path / "store"))
    first = evaluate_source(MARKED.format(tag="one"))
    assert gates(first) == (True, True), first.get("failure")
    caches = first["kernel_cache"]
    assert caches["candidate"]["used"] is False and caches["candidate"]["saved"]["saved"] is True
    again = evaluate_source(MARKED.format(tag="one"))
    assert again["kernel_cache"]["candidate"]["used"] is True
    assert again["failure"]["kind"] == "correctness"  # it saw its own marker: restored
    other = evaluate_source(MARKED.format(tag="two"))  # other files: a cold cache
    assert gates(other) == (True, True), other.get("failure")
    assert other["kernel_cache"]["candidate"]["key"] != caches["candidate"]["key"]
    assert other["kernel_cache"]["baseline"]["key"] == caches["baseline"]["key"]
    off = evaluate_source(MARKED.format(tag="one"), confinement="off")
    assert gates(off) == (True, True), off.get("failure")
    assert off["kernel_cache"]["candidate"] == {"key": None, "used": False,
                                                "reason": "runners not confined",
                                                "saved": {"saved": False,
                                                          "reason": "runners not confined"}}


def test_the_record_is_taken_when_the_judge_sends_it_not_when_its_process_exits(
        make_task: Callable[..., Path], tmp_path: Path) -> None:
    """The judge's own exit (interpreter and CUDA teardown) is not waited for: the watcher returns
    on the result and the caller kills the judge's process group."""
    import queue
    import subprocess

    request = make_request(make_task(), tmp_path, seeds=1, timeouts=None)
    judge = subprocess.Popen(["sleep", "60"], start_new_session=True)
    messages: queue.Queue[tuple[float, dict[str, Any] | None]] = queue.Queue()
    now = time.monotonic()
    for offset, phase in ((0.2, "startup"), (1.2, "correctness"), (1.5, "done")):
        messages.put((now + offset, {"event": "phase", "phase": phase}))
    messages.put((now + 1.6, {"event": "result", "result": {"phases": {}}}))
    try:
        watch, failure = evaluate._watch(judge, request, messages)
        assert failure is None and watch.result == {"phases": {}}
        assert judge.poll() is None  # still alive: its exit was not waited for
        assert set(watch.phase_times) == {"spawn", "startup", "correctness", "done"}
        assert watch.phase_times["startup"] == pytest.approx(1.0, abs=0.01)
    finally:
        evaluate._kill_group(judge)
    assert judge.returncode == -signal.SIGKILL


# --------------------------------------------------------------------------- judges started ahead

READS_ELSEWHERE = """\
import os
import torch

BLOCKED = {blocked!r}


def scale_add(x, y, alpha):
    for path in BLOCKED:
        try:
            with open(path, "rb"):
                pass
        except OSError:
            continue
        return torch.zeros_like(x)  # it could read what it must not: wrong on purpose
    return torch.add(x, y, alpha=alpha)
"""


def _warm_request(make_task: Callable[..., Path], tmp_path: Path, source: str
                  ) -> tuple[EvaluationRequest, Path]:
    task_dir = make_task()
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(source, encoding="utf-8")
    return make_request(task_dir, candidate, seeds=1, timeouts=None), task_dir


def test_a_judge_started_ahead_uses_its_confined_runners_and_they_read_only_their_stage(
        make_task: Callable[..., Path], tmp_path: Path) -> None:
    from aka_core.evaluation import warm

    task_dir = make_task()
    blocked = [str(task_dir / "reference.py"), str(task_dir / "kernel.py"),
               "../stage/baseline/kernel.py", "../baseline/home"]
    request, task_dir = _warm_request(make_task, tmp_path, READS_ELSEWHERE.format(blocked=blocked))
    profile = warm.WarmProfile(device="cpu", confinement="required", protected=request.protected)
    evaluate.offer(evaluate.prestart_judge(profile, log_path=tmp_path / "warm.log"))
    record = evaluate.evaluate(request, log_path=tmp_path / "eval.log")
    assert record.get("warm") == {"used": True}, record.get("warm")
    gates = evaluate.outcome(as_record(record))
    assert gates.pass_correctness is True, record.get("failure")
    assert record["confinement"]["confined"] is True
    assert (tmp_path / "eval.log").exists()


def test_a_judge_started_for_another_profile_starts_fresh_runners(
        make_task: Callable[..., Path], tmp_path: Path) -> None:
    from aka_core.evaluation import warm

    request, _ = _warm_request(make_task, tmp_path, CORRECT)
    evaluate.offer(evaluate.prestart_judge(warm.WarmProfile(device="cuda", protected=())))
    record = evaluate.evaluate(request, log_path=tmp_path / "eval.log")
    assert record["warm"]["used"] is False and "device cpu" in record["warm"]["reason"]
    assert evaluate.outcome(as_record(record)).pass_correctness is True, record.get("failure")


def test_a_judge_offered_for_another_environment_is_not_used(
        make_task: Callable[..., Path], tmp_path: Path) -> None:
    from aka_core.evaluation import warm

    request, _ = _warm_request(make_task, tmp_path, CORRECT)
    offered = evaluate.prestart_judge(warm.WarmProfile(device="cpu"), env={"AKA_GPU_X": "1"})
    evaluate.offer(offered)
    record = evaluate.evaluate(request, log_path=tmp_path / "eval.log")
    assert "warm" not in record  # a fresh judge: not started ahead
    assert offered.proc.poll() is not None  # and the offered one was stopped
    assert evaluate.outcome(as_record(record)).pass_correctness is True
