"""The e2e judge end to end on the CPU: the tiny variant of tasks/e2e/qwen3_norms, confined
engine processes, the operator and model oracles, CPU timing (a diagnostic, never paid), and the
lifecycle through the core (``api.evaluate_candidate``, ``api.run``, ``aka run``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from aka_backend_e2e import workload as wl
from aka_backend_e2e.judge import E2EJudge
from aka_backend_e2e.variants import write_tiny_variant

from aka_core.plugin import JudgeRequest, PluginHost, dump_yaml, load_plain_yaml, sandbox
from aka_core.testing import api, load_task, preserve_baseline

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "tasks" / "e2e" / "qwen3_norms"
CONFINEMENT = "best_effort"  # confined where the host can; the record says what was applied
# A correct norm written differently from the baseline's (what a stored solution looks like).
OTHER_NORM = '''\
import torch


def rms_norm(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def fused_add_rms_norm(x, residual, weight, eps):
    residual_out = x + residual
    return rms_norm(residual_out, weight, eps), residual_out
'''

pytestmark = pytest.mark.skipif(not SOURCE.is_dir(), reason="needs the repository's tasks")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AKA_E2E_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield mp


@pytest.fixture(scope="module")
def tasks(env, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("e2e") / "tasks"
    write_tiny_variant(SOURCE, root / "e2e" / "norms_tiny")
    return root


@pytest.fixture(scope="module")
def task_dir(tasks: Path) -> Path:
    return tasks / "e2e" / "norms_tiny"


def candidate(tmp_path: Path, norm: str) -> Path:
    (tmp_path / "cand" / "kernels").mkdir(parents=True)
    (tmp_path / "cand" / "kernels" / "norm.py").write_text(norm)
    return tmp_path / "cand"


def evaluate(task_dir: Path, cand: Path, **kwargs):
    return api.evaluate_candidate(task_dir, cand, device="cpu", confinement=CONFINEMENT, **kwargs)


def test_the_baseline_as_candidate_is_accepted_and_timed_on_the_cpu(task_dir: Path) -> None:
    result = evaluate(task_dir, task_dir)
    ev = result.evaluation
    assert result.status == "completed", (result.error, ev.failure)
    assert (result.pass_compilation, result.pass_correctness) == (True, True)
    assert result.candidate_accepted, result.acceptance
    assert result.score == 0.0 and result.speedup_ratio is None, "a CPU result is never paid"
    assert ev.unknown_keys() == []  # every key the judge wrote has its typed field
    perf = ev.performance
    assert perf is not None and perf.measured is False
    assert "no GPU" in (perf.reason_not_measured or "")
    timing = perf.cpu_diagnostic
    assert timing is not None and timing.ci95 is not None
    assert (timing.speedup or 0) > 0 and len(timing.ci95) == 2, timing  # noisy: a diagnostic
    (case,) = timing.cases or []
    assert (case.baseline_median_ms or 0) > 0 and (case.candidate_median_ms or 0) > 0
    assert ev.device is not None and ev.device.kind == "cpu"
    e2e = ev.e2e
    assert e2e is not None and e2e.arms is not None
    assert e2e.arms["baseline"].kernel_digest == e2e.arms["candidate"].kernel_digest
    assert set(e2e.arms["candidate"].entrypoints_called or []) >= {"rms_norm",
                                                                   "fused_add_rms_norm"}
    (pair,) = (e2e.pairs or {})["tiny_c2"]
    assert pair.order == ["baseline", "candidate"]
    assert pair.baseline is not None and pair.baseline.tokens == 24
    model = e2e.oracle.model if e2e.oracle is not None else None
    assert model is not None and model.candidate is not None and model.allowance is not None
    assert (model.candidate.max_regret or 0) <= (model.allowance.max_regret or 0)
    audited = (e2e.audits or {})["tiny_c2"].candidate
    assert audited is not None and audited.runs == 1
    checks = ev.correctness.checks if ev.correctness is not None else []
    assert any((c.case or "").startswith("operator:rms_norm") for c in checks)
    assert all(c.passed and c.held_out for c in checks), "secret seeds by default"
    assert ev.confinement is not None and ev.confinement.policy == CONFINEMENT
    assert set(ev.confinement.sides or {}) == {"baseline", "candidate"}


def test_a_mutant_is_rejected_by_correctness(task_dir: Path, tmp_path: Path) -> None:
    wrong_eps = OTHER_NORM.replace("+ eps)", "+ 1e-2)")
    result = evaluate(task_dir, candidate(tmp_path, wrong_eps))
    failure = result.evaluation.failure
    assert result.status == "completed" and not result.candidate_accepted
    assert (result.pass_compilation, result.pass_correctness) == (True, False)
    assert failure is not None and failure.kind == "correctness", failure
    assert failure.entrypoint == "rms_norm", failure
    assert result.evaluation.performance is None, "nothing timed after a wrong answer"


def test_a_candidate_that_crashes_at_import_fails_to_build(task_dir: Path,
                                                          tmp_path: Path) -> None:
    result = evaluate(task_dir, candidate(tmp_path, "raise RuntimeError('boom at import')\n"))
    failure = result.evaluation.failure
    assert result.status == "completed" and not result.candidate_accepted
    assert result.pass_compilation is False and failure is not None and failure.kind == "compile"
    assert "boom at import" in failure.message and failure.arm == "candidate"


def test_an_engine_that_fills_the_disk_is_stopped_and_blamed(task_dir: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # The candidate's tree writes into its engine's scratch at import (the limit is lowered so
    # that the test writes little): killed at the limit, its arm's ``resources`` failure.
    monkeypatch.setenv("AKA_SCRATCH_LIMIT", "32M")
    filler = ("import os, time\n"
              "chunk = os.urandom(1 << 20) * 8\n"
              "for i in range(16):\n"
              "    open(os.path.join(os.environ['TMPDIR'], f'fill{i}'), 'wb').write(chunk)\n"
              "time.sleep(5)\n")
    result = evaluate(task_dir, candidate(tmp_path, filler + OTHER_NORM))
    failure = result.evaluation.failure
    assert result.status == "completed" and not result.candidate_accepted
    assert failure is not None and failure.kind == "resources" and failure.arm == "candidate"
    assert "over the limit of 32.0 MiB (AKA_SCRATCH_LIMIT)" in failure.message


def test_an_engine_that_fills_the_hosts_memory_is_stopped_and_blamed(
        task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The candidate's tree holds 1.5 GiB in memory files it never maps (in no process's size;
    # each under the engine's file size limit) under a limit lowered to 1 GiB: killed at the
    # limit, its arm's ``resources`` failure.
    monkeypatch.setenv("AKA_MEMORY_LIMIT", "1G")
    holder = ("import os, time\n"
              "chunk = b'x' * (16 << 20)\n"
              "held = [os.memfd_create(f'held{i}') for i in range(24)]\n"
              "for fd in held:\n"
              "    for _ in range(4):\n"
              "        os.write(fd, chunk)\n"
              "time.sleep(5)\n")
    result = evaluate(task_dir, candidate(tmp_path, holder + OTHER_NORM))
    failure = result.evaluation.failure
    assert result.status == "completed" and not result.candidate_accepted
    assert failure is not None and failure.kind == "resources" and failure.arm == "candidate"
    assert "over the limit of 1.00 GiB (AKA_MEMORY_LIMIT)" in failure.message


PAIR_MAKER = """\
import socket
try:
    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
except PermissionError:
    pass
else:
    raise RuntimeError("made a socket pair: memory files could wait on it, out of sight")
"""


@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="the engine's filter comes with its sandbox")
def test_an_engine_cannot_make_a_socket_pair_to_hide_memory_files_on(task_dir: Path,
                                                                      tmp_path: Path) -> None:
    # Memory files queued on a socket pair and closed are in no process's size: an engine, as a
    # kernel's runner, may connect no socket of its own (``seccomp``). The tree fails to import
    # where it made one: so it does unconfined, the control.
    tree = candidate(tmp_path, PAIR_MAKER + OTHER_NORM)
    result = api.evaluate_candidate(task_dir, tree, device="cpu", confinement="required")
    assert result.status == "completed" and result.evaluation.failure is None, (
        result.evaluation.failure)
    control = api.evaluate_candidate(task_dir, tree, device="cpu", confinement="off")
    failure = control.evaluation.failure
    assert failure is not None and failure.kind == "compile" and "made a socket pair" in (
        failure.message)


def test_a_broken_baseline_is_the_tasks_fault(task_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "tasks" / "e2e" / "broken"
    shutil.copytree(task_dir, broken)
    # Defines the entrypoints (the format's static check passes) but fails when imported.
    (broken / "kernels" / "norm.py").write_text("raise RuntimeError('baseline broken')\n"
                                                + OTHER_NORM)
    result = evaluate(broken, candidate(tmp_path, OTHER_NORM))
    assert result.status == "error" and "baseline broken" in (result.error or "")
    assert result.pass_compilation is None and result.pass_correctness is None
    assert result.evaluation.failure_kind == "task_error"


def test_weights_this_host_cannot_reproduce_are_an_infra_error(task_dir: Path,
                                                              tmp_path: Path) -> None:
    other = tmp_path / "tasks" / "e2e" / "other_weights"
    shutil.copytree(task_dir, other)
    text = (other / "workload.yaml").read_text()
    pinned = wl.load_workload(other).weights_digest
    assert pinned
    (other / "workload.yaml").write_text(text.replace(pinned, "sha256:" + "0" * 64))
    workload = wl.load_workload(other)
    (other / wl.LOCK_FILE).write_text(json.dumps(
        wl.expected_lock(other, workload, wl.pinned_weights(workload))))
    result = evaluate(other, candidate(tmp_path, OTHER_NORM))
    assert result.status == "infra_error", result.error
    assert "cannot reproduce" in (result.error or "")


def test_a_preserved_copy_that_differs_from_its_lock_is_a_task_error(task_dir: Path,
                                                                    tmp_path: Path) -> None:
    task = load_task(task_dir, "e2e/norms_tiny", PluginHost())
    baseline = tmp_path / "baseline"
    preserve_baseline(task, baseline)
    rotary = baseline / "kernels" / "rotary.py"
    rotary.chmod(0o644)
    rotary.write_text(rotary.read_text() + "\n# changed\n")
    (tmp_path / "logs").mkdir()
    record = E2EJudge().evaluate(JudgeRequest(task=task, workspace=None, baseline=baseline,
                                              logs=tmp_path / "logs", device="cpu"))
    failure = record["failure"]
    assert failure["kind"] == "task_error" and "kernels/rotary.py changed" in failure["message"]
    assert "python -m aka_backend_e2e.workload lock" in failure["message"]


def run_config(tmp_path: Path, tasks: Path, agent: dict) -> Path:
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({
        "agent": agent, "tasks": ["e2e/norms_tiny"], "target_gpu_model": "cpu",
        "tasks_directory": str(tasks),
        "evaluation": {"device": "cpu", "measure_performance": False,
                       "confinement": CONFINEMENT}}))
    return config


def test_aka_run_replays_a_stored_solution_on_the_cpu(tasks: Path, tmp_path: Path) -> None:
    stored = tmp_path / "solutions" / "e2e" / "norms_tiny" / "kernels"
    stored.mkdir(parents=True)
    (stored / "norm.py").write_text(OTHER_NORM)
    config = run_config(tmp_path, tasks, {"template": "replay", "timeout_seconds": 300,
                                          "options": {"source": str(tmp_path / "solutions")}})
    done = subprocess.run([sys.executable, "-m", "aka_core.cli", "run", str(config),
                           "--output-root", str(tmp_path / "out")], capture_output=True,
                          text=True, env={**os.environ}, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = (tmp_path / "out").rglob("e2e/norms_tiny/task_result.yaml")
    result = load_plain_yaml(path)
    assert result["status"] == "completed" and result["candidate_accepted"], result.get("error")
    assert result["integrity"]["changed_files"] == ["kernels/norm.py"]
    assert result["backend"] == "e2e"


def test_api_run_with_the_noop_agent_judges_the_baseline(tasks: Path, tmp_path: Path) -> None:
    config = run_config(tmp_path, tasks, {"template": "noop", "timeout_seconds": 60})
    outcome = api.run(config, output_root=tmp_path / "out")
    (result,) = outcome.results
    assert result.status == "completed" and result.candidate_accepted, result.error
    prompt = (outcome.run_dir / "e2e" / "norms_tiny" / "logs").glob("*")
    assert result.evaluation.correctness_passed()
    assert list(prompt) is not None


WARMUP_CRASH = OTHER_NORM + '''

def rms_norm(x, weight, eps):  # fails in the engine's warm-up, as a broken build would
    raise RuntimeError("no compiler")
'''


def test_a_candidate_engine_that_fails_its_warm_up_is_blamed_when_the_toolchain_works(
        task_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("triton")
    result = evaluate(task_dir, candidate(tmp_path, WARMUP_CRASH))
    assert result.status == "completed" and not result.candidate_accepted
    ev = result.evaluation
    assert ev.failure is not None and ev.failure.kind == "crashed"
    control = ev.e2e.toolchain_control if ev.e2e is not None else None
    assert control is not None and control.passed is True and control.message is None


def test_a_toolchain_that_fails_a_known_good_kernel_too_is_the_evaluators_fault(
        task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The control engine's known-good Triton kernel failing stands for a broken toolchain (on
    # an H200: a Triton build whose compiler had no scratch folder).
    pytest.importorskip("triton")
    from aka_backend_e2e import judge

    broken = tmp_path / "broken_canary"
    broken.mkdir()
    (broken / "activation.py").write_text(
        "def silu_and_mul(x):\n    raise RuntimeError('cannot create temporary file')\n")
    monkeypatch.setattr(judge, "CANARY_TREE", broken)
    result = evaluate(task_dir, candidate(tmp_path, WARMUP_CRASH))
    assert result.status == "infra_error"
    ev = result.evaluation
    failure = ev.failure
    assert failure is not None and failure.kind == "infra_error" and failure.retryable
    assert "toolchain" in failure.message
    assert ev.e2e is not None and ev.e2e.toolchain_control is not None
    assert ev.e2e.toolchain_control.passed is False


def test_a_candidate_file_swapped_after_its_listing_is_the_candidates_failure(tmp_path: Path
                                                                              ) -> None:
    # The judge lists the candidate's kernel tree, then copies each file of the size it saw. A
    # file that grew, or became a FIFO held open by a writer of the candidate's, is the
    # candidate's ``compile`` failure, never the judge's crash (an evaluator fault, retried).
    from aka_backend_e2e.judge import JudgeFailure, _copy_regular

    from aka_core.plugin import FailureKind

    grown = tmp_path / "grown.py"
    grown.write_text("x = 1\n")
    size = grown.stat().st_size
    grown.write_text("x = 1\ny = 2\n")
    with pytest.raises(JudgeFailure) as failure:
        _copy_regular(grown, tmp_path / "out" / "grown.py", size)
    assert failure.value.kind is FailureKind.COMPILE and "grown.py" in str(failure.value)
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)  # held open: a blocking read would wait on it
    try:
        with pytest.raises(JudgeFailure) as failure:
            _copy_regular(fifo, tmp_path / "out" / "fifo.py", 0)
        assert failure.value.kind is FailureKind.COMPILE
    finally:
        os.close(writer), os.close(reader)
    _copy_regular(grown, tmp_path / "out" / "grown.py", grown.stat().st_size)
    assert (tmp_path / "out" / "grown.py").read_text() == "x = 1\ny = 2\n"
