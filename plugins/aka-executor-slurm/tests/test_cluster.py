"""The slurm executor on a real Slurm cluster: real `aka run` processes, real jobs, real scancel.

Needs a responding cluster whose compute nodes see this machine's temporary folder (CI starts a
one-node cluster on localhost with scripts/ci/slurm-setup.sh); skipped otherwise, or failed when
AKA_REQUIRE_SLURM is set (as CI does, so that a broken cluster cannot pass as a skip). Tasks are small
python-backend tasks run with the noop agent on the CPU.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aka_core.plugin import dump_yaml, load_plain_yaml
from aka_core.testing import processes, read_task_result, write_task

pytestmark = pytest.mark.slow

SETUP_HINT = "start one with scripts/ci/slurm-setup.sh (as root)"
# The slow task's reference sleeps while this file exists, so a job is reliably running when
# it is cancelled; deleting the file lets the task finish on resume.
SLOW_REFERENCE = '''\
import os
import time

MARKER = {marker!r}


def scale_add_reference(x, y, alpha):
    deadline = time.monotonic() + 300
    while os.path.exists(MARKER) and time.monotonic() < deadline:
        time.sleep(0.2)
    return x.double() + alpha * y.double()
'''


def _cluster_problem() -> str | None:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return f"Slurm is not installed (no sinfo/sbatch on PATH); {SETUP_HINT}"
    try:
        proc = subprocess.run(["sinfo", "--noheader", "--format=%T"], capture_output=True,
                              text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return f"sinfo did not answer within 20 s; {SETUP_HINT}"
    if proc.returncode != 0:
        return f"sinfo failed ({proc.stderr.strip()}); {SETUP_HINT}"
    states = proc.stdout.split()
    if not any(s.rstrip("*~#") in ("idle", "mixed", "allocated", "completing") for s in states):
        return f"no Slurm node is up (sinfo states: {states or 'none'}); {SETUP_HINT}"
    return None


@pytest.fixture(scope="module")
def cluster() -> None:
    problem = _cluster_problem()
    if problem and os.environ.get("AKA_REQUIRE_SLURM"):
        pytest.fail(f"AKA_REQUIRE_SLURM is set but {problem}")
    if problem:
        pytest.skip(problem)


def cluster_gres() -> str:
    out = subprocess.run(["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True,
                         check=False)
    return out.stdout


# --------------------------------------------------------------------------- helpers


def make_config(tmp_path: Path, tasks: list[str], executor: dict[str, Any] | None,
                slow: str | None = None, name: str = "run.yaml") -> Path:
    for task_id in tasks:
        folder = write_task(tmp_path / "tasks", task_id)
        if task_id == slow:
            marker = tmp_path / "slow.marker"
            marker.touch()
            (folder / "reference.py").write_text(SLOW_REFERENCE.format(marker=str(marker)),
                                                 encoding="utf-8")
    data: dict[str, Any] = {
        "agent": {"template": "noop", "timeout_seconds": 60},
        "tasks": sorted({t.split("/")[0] for t in tasks}),
        "target_gpu_model": "cpu",
        "evaluation": {"seeds_per_case": 1, "measure_performance": False},
    }
    if executor is not None:
        data["executor"] = executor
    path = tmp_path / name
    path.write_text(dump_yaml(data), encoding="utf-8")
    return path


def aka(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    progress = ["--no-progress"] if args[0] == "run" else []
    return subprocess.run([sys.executable, "-m", "aka_core.cli", *args, *progress],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def aka_background(*args: str, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "aka_core.cli", *args, "--no-progress"],
                                cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def wait_for(condition: Any, timeout: float, what: str) -> Any:
    """``processes.wait_for`` at a slower pace: conditions here run squeue and sacct."""
    return processes.wait_for(condition, timeout, what, interval=0.2)


def run_dir_in(output_root: Path) -> Path:
    runs = list(output_root.glob("workspace_cpu_noop/run_*"))
    assert len(runs) == 1, runs
    return runs[0]


def jobs(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / ".slurm" / "jobs.json"
    return json.loads(path.read_text(encoding="utf-8"))["jobs"] if path.is_file() else []


def job_of(run_dir: Path, task_id: str) -> dict[str, Any] | None:
    found = [j for j in jobs(run_dir) if j["task_id"] == task_id]
    return found[-1] if found else None


def squeue_state(job_id: str) -> str:
    out = subprocess.run(["squeue", "--noheader", "--array", "--states=all",
                          f"--jobs={job_id}", "--format=%i|%T"],
                         capture_output=True, text=True, check=False).stdout
    states = dict(line.split("|", 1) for line in out.split())
    return states.get(job_id, "")


def running_in_evaluation(run_dir: Path, task_id: str) -> str | None:
    """The job id of ``task_id`` once its job runs and the task is in its evaluation."""
    job = job_of(run_dir, task_id)
    if job is None or squeue_state(job["job_id"]) != "RUNNING":
        return None
    if not (run_dir / task_id / "logs" / "evaluation.log").is_file():
        return None
    return str(job["job_id"])


def result_fields(run_dir: Path, task_id: str) -> dict[str, Any]:
    """What must not depend on where a task ran."""
    result = read_task_result(run_dir / task_id / "task_result.yaml")
    return {
        "status": result.status, "pass_compilation": result.pass_compilation,
        "pass_correctness": result.pass_correctness,
        "candidate_accepted": result.candidate_accepted, "score": result.score,
        "agent_status": result.agent_execution.status if result.agent_execution else None,
        "integrity_ok": result.integrity.ok if result.integrity else None,
        "gates": [(g.name, g.passed) for g in result.acceptance.gates] if result.acceptance
        else None,
        "keys": sorted(load_plain_yaml(run_dir / task_id / "task_result.yaml")),
    }


def summary_statuses(run_dir: Path) -> dict[str, str]:
    summary = json.loads((run_dir / "reports" / "summary.json").read_text(encoding="utf-8"))
    return {row["task_id"]: row["status"] for row in summary["tasks"]}


# --------------------------------------------------------------------------- tests


def test_run_through_slurm_matches_a_local_run(cluster: None, tmp_path: Path) -> None:
    tasks = ["demo/a", "demo/b"]
    options = {"poll_seconds": 1, "time": "00:10:00", "cpus_per_task": 1,
               "max_concurrent": 1, "environment": {"AKA_TEST_MARK": "slurm job"}}
    slurm_config = make_config(tmp_path, tasks, {"name": "slurm", "options": options},
                               name="slurm.yaml")
    local_config = make_config(tmp_path, tasks, None, name="local.yaml")

    slurm = aka("run", str(slurm_config), "--output-root", str(tmp_path / "slurm"), cwd=tmp_path)
    assert slurm.returncode == 0, slurm.stderr[-4000:]
    local = aka("run", str(local_config), "--output-root", str(tmp_path / "local"), cwd=tmp_path)
    assert local.returncode == 0, local.stderr[-4000:]

    slurm_run, local_run = run_dir_in(tmp_path / "slurm"), run_dir_in(tmp_path / "local")
    assert slurm.stdout.strip().splitlines()[-1] == str(slurm_run)
    for task_id in tasks:
        assert result_fields(slurm_run, task_id) == result_fields(local_run, task_id), task_id
        assert result_fields(slurm_run, task_id)["status"] == "completed"
    assert summary_statuses(slurm_run) == dict.fromkeys(tasks, "completed")

    recorded = jobs(slurm_run)
    assert [j["task_id"] for j in recorded] == tasks, "one job per task"
    assert all(j["state"] == "COMPLETED" and j["has_result"] for j in recorded), recorded
    # max_concurrent: 1 submits the second job only once the first has ended.
    assert recorded[1]["submitted_at"] >= recorded[0]["ended_at"]
    for job in recorded:
        copied = slurm_run / job["task_id"] / "logs" / f"slurm-{job['job_id']}.out"
        text = copied.read_text(encoding="utf-8")
        assert f"aka: job {job['job_id']}, task {job['task_id']}" in text
        assert text.rstrip().endswith("completed"), "run-task printed the task's status"
        assert (slurm_run / job["log"]).is_file()
        assert (slurm_run / job["script"]).is_file()


def test_cancelled_job_leaves_its_task_missing_and_resume_completes_it(
        cluster: None, tmp_path: Path) -> None:
    tasks = ["demo/a_fast", "demo/b_slow", "demo/c_fast"]
    options = {"poll_seconds": 1, "array": True, "cpus_per_task": 1}
    config = make_config(tmp_path, tasks, {"name": "slurm", "options": options},
                         slow="demo/b_slow")
    output_root = tmp_path / "out"
    log = tmp_path / "run.log"
    proc = aka_background("run", str(config), "--output-root", str(output_root), cwd=tmp_path,
                          log=log)
    try:
        run_dir = wait_for(lambda: list(output_root.glob("workspace_cpu_noop/run_*/run.yaml")),
                           60, "run.yaml")[0].parent
        slow_job = wait_for(lambda: running_in_evaluation(run_dir, "demo/b_slow"), 120,
                            "the slow task's job to be evaluating")
        assert "_" in slow_job, "array: one element per task"
        subprocess.run(["scancel", slow_job], check=True)
        code = proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text(encoding="utf-8")
    assert code == 0, output[-4000:]

    results = {t for t in tasks if (run_dir / t / "task_result.yaml").is_file()}
    assert results == {"demo/a_fast", "demo/c_fast"}, output[-4000:]
    report = aka("report", str(run_dir), cwd=tmp_path)  # rows from the run directory itself
    assert report.returncode == 0, report.stderr[-4000:]
    assert summary_statuses(run_dir) == {"demo/a_fast": "completed", "demo/b_slow": "missing",
                                         "demo/c_fast": "completed"}
    cancelled = job_of(run_dir, "demo/b_slow")
    assert cancelled is not None
    assert (cancelled["job_id"], cancelled["state"], cancelled["has_result"]) == (
        slow_job, "CANCELLED", False)
    assert "job ended without a result" in output and "demo/b_slow" in output
    assert f"aka run --resume {run_dir}" in output
    assert "CANCELLED" in (run_dir / cancelled["log"]).read_text(encoding="utf-8")
    kept = {t: (run_dir / t / "task_result.yaml").read_bytes() for t in results}

    (tmp_path / "slow.marker").unlink()
    resumed = aka("run", "--resume", str(run_dir), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert summary_statuses(run_dir) == dict.fromkeys(tasks, "completed")
    assert result_fields(run_dir, "demo/b_slow")["pass_correctness"] is True
    for task_id, data in kept.items():
        assert (run_dir / task_id / "task_result.yaml").read_bytes() == data, "redone"
    recorded = jobs(run_dir)
    assert [j["task_id"] for j in recorded] == [*tasks, "demo/b_slow"], "only the missing task"
    assert recorded[-1]["state"] == "COMPLETED" and recorded[-1]["has_result"] is True
    assert len(list((run_dir / ".interrupted").glob("*/demo/b_slow/workspace"))) == 1, (
        "the cancelled attempt is kept under .interrupted/")


def test_ctrl_c_cancels_the_jobs_and_resume_finishes(cluster: None, tmp_path: Path) -> None:
    tasks = ["demo/b_slow"]
    config = make_config(tmp_path, tasks, {"name": "slurm", "options": {"poll_seconds": 1}},
                         slow="demo/b_slow")
    output_root = tmp_path / "out"
    log = tmp_path / "run.log"
    proc = aka_background("run", str(config), "--output-root", str(output_root), cwd=tmp_path,
                          log=log)
    try:
        run_dir = wait_for(lambda: list(output_root.glob("workspace_cpu_noop/run_*/run.yaml")),
                           60, "run.yaml")[0].parent
        job_id = wait_for(lambda: running_in_evaluation(run_dir, "demo/b_slow"), 120,
                          "the job to be evaluating")
        os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text(encoding="utf-8")
    assert code == 130, output[-4000:]
    assert "cancelled the run's Slurm jobs" in output
    wait_for(lambda: squeue_state(job_id) in ("CANCELLED", ""), 60, "the job to be cancelled")
    assert job_of(run_dir, "demo/b_slow")["state"] == "CANCELLED"  # type: ignore[index]

    (tmp_path / "slow.marker").unlink()
    resumed = aka("run", "--resume", str(run_dir), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert summary_statuses(run_dir) == {"demo/b_slow": "completed"}


def test_ctrl_c_can_leave_jobs_running_and_resume_cancels_them_first(
        cluster: None, tmp_path: Path) -> None:
    options = {"poll_seconds": 1, "cancel_on_interrupt": False}
    config = make_config(tmp_path, ["demo/b_slow"], {"name": "slurm", "options": options},
                         slow="demo/b_slow")
    output_root = tmp_path / "out"
    proc = aka_background("run", str(config), "--output-root", str(output_root), cwd=tmp_path,
                          log=tmp_path / "run.log")
    resume: subprocess.Popen[bytes] | None = None
    try:
        run_dir = wait_for(lambda: list(output_root.glob("workspace_cpu_noop/run_*/run.yaml")),
                           60, "run.yaml")[0].parent
        old_job = wait_for(lambda: running_in_evaluation(run_dir, "demo/b_slow"), 120,
                           "the job to be evaluating")
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        output = (tmp_path / "run.log").read_text(encoding="utf-8")
        assert "jobs keep running" in output and f"squeue --jobs={old_job}" in output
        assert squeue_state(old_job) == "RUNNING", "the job outlives aka run"

        # A resume while it still runs cancels it before submitting the task again.
        resume = aka_background("run", "--resume", str(run_dir), cwd=tmp_path,
                                log=tmp_path / "resume.log")
        new_job = wait_for(lambda: (job_of(run_dir, "demo/b_slow") or {}).get("job_id")
                           not in (None, old_job) and job_of(run_dir, "demo/b_slow"), 60,
                           "a new job")["job_id"]
        assert squeue_state(old_job) in ("CANCELLED", "")
        (tmp_path / "slow.marker").unlink()
        assert resume.wait(timeout=180) == 0, (tmp_path / "resume.log").read_text()[-4000:]
    finally:
        for p in (proc, resume):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    resume_log = (tmp_path / "resume.log").read_text(encoding="utf-8")
    assert "cancelling jobs of an earlier attempt" in resume_log
    states = {j["job_id"]: j["state"] for j in jobs(run_dir)}
    assert states == {old_job: "CANCELLED", new_job: "COMPLETED"}
    assert summary_statuses(run_dir) == {"demo/b_slow": "completed"}


def test_gpu_job_gets_a_gpu_from_slurm(cluster: None, tmp_path: Path) -> None:
    if "gpu" not in cluster_gres():
        pytest.skip(f"the cluster declares no GPUs (gres: {cluster_gres().split()}); "
                    "scripts/ci/slurm-setup.sh declares two fake ones")
    options = {"poll_seconds": 1, "gpus_per_task": 1}
    config = make_config(tmp_path, ["demo/a"], {"name": "slurm", "options": options})
    run = aka("run", str(config), "--output-root", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    run_dir = run_dir_in(tmp_path / "out")
    job = job_of(run_dir, "demo/a")
    assert job is not None and job["state"] == "COMPLETED"
    assert "#SBATCH --gres=gpu:1" in (run_dir / job["script"]).read_text(encoding="utf-8")
    first_line = (run_dir / job["log"]).read_text(encoding="utf-8").splitlines()[0]
    # Slurm's gpu gres plugin sets CUDA_VISIBLE_DEVICES to the index of the GPU it allocated
    # (observed on the one-node CI cluster: "0").
    assert re.search(r"CUDA_VISIBLE_DEVICES=\d+$", first_line), first_line
    assert result_fields(run_dir, "demo/a")["status"] == "completed"
