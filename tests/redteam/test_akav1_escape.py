"""Exploits against harness-trusted tasks (aka-tasks-akav1): the task's own commands judge the
candidate, in the candidate's processes, so a candidate can forge its verdict (the record says
so: ``trust: harness``). What must hold is the sandbox around those commands: the candidate's
code, run by the task's correctness command, cannot read the corpus or the baseline's copy,
write outside its workspace, or reach the network; and the record stays marked."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path

import pytest

from aka_core import api
from aka_core.evaluation import sandbox

pytest.importorskip("aka_tasks_akav1")

RUNNER = '''
import sys
sys.path.insert(0, "src")
from kernel import scale
assert scale([1, 2, 3]) == [2, 4, 6], "wrong result"
'''

PROBE = '''
import json, os, pathlib, socket

found = []
for path in {blocked!r}:
    try:
        pathlib.Path(path).read_bytes()[:1]
        found.append("read " + path)
    except OSError:
        pass
for path in {writes!r}:
    try:
        pathlib.Path(path).write_text("planted")
        found.append("wrote " + path)
    except OSError:
        pass
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    found.append("network")
except OSError:
    pass
try:  # a host daemon's socket (Landlock does not govern connect)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
        daemon.connect({daemon!r})
    found.append("daemon socket")
except OSError:
    pass


def scale(xs):
    if found:  # an escape: the task's check then fails, on purpose
        return [0 for _ in xs]
    return [2 * x for x in xs]
'''


def write_task(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "kernel.py").write_text("def scale(xs):\n    return [2 * x for x in xs]\n")
    (root / "check.py").write_text(RUNNER)
    (root / "secret_held_out.txt").write_text("the corpus's hidden cases\n")
    (root / "config.yaml").write_text(json.dumps({
        "source_file_path": ["src/kernel.py"], "correctness_command": "python3 check.py",
        "task_type": "triton2triton", "aka": {"cpu": True}}))
    return root


def test_the_candidates_code_run_by_the_tasks_commands_stays_in_its_workspace(
        tmp_path: Path) -> None:
    if sandbox.landlock_abi() <= 0:
        pytest.skip("no Landlock here: commands cannot be confined")
    task = write_task(tmp_path / "tasks" / "akav1" / "scale")
    home_plant = Path.home() / ".aka-redteam-planted"
    outside = tmp_path / "outside-planted.txt"
    blocked = [str(task / "secret_held_out.txt"), str(task / "config.yaml"),
               "../baseline/secret_held_out.txt"]
    writes = [str(outside), str(home_plant), str(task / "src" / "kernel.py")]
    candidate = tmp_path / "candidate" / "src"
    candidate.mkdir(parents=True)
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    daemon_path = tmp_path / "daemon.sock"
    daemon.bind(str(daemon_path))
    daemon.listen(1)
    (candidate / "kernel.py").write_text(textwrap.dedent(PROBE.format(
        blocked=blocked, writes=writes, daemon=str(daemon_path))))
    try:
        result = api.evaluate_candidate(task, candidate.parent, device="cpu")
        assert result.pass_correctness is True, result.evaluation.failure
        assert result.evaluation.trust == "harness"
        assert result.evaluation.confinement.confined is True
        assert result.evaluation.unknown_keys() == []  # every key a harness writes is typed
        assert not outside.exists() and not home_plant.exists()
        assert (task / "src" / "kernel.py").read_text().startswith("def scale")
    finally:
        home_plant.unlink(missing_ok=True)
        daemon.close()


FILLER = '''
import os, pathlib, time

{fill}
time.sleep(10)


def scale(xs):
    return [2 * x for x in xs]
'''

FILL_DISK = '''chunk = os.urandom(1 << 20) * 8
for i in range(16):  # 128 MiB, in files under the 512 MB file limit
    pathlib.Path(f"fill{i}").write_bytes(chunk)'''

FILL_MEMORY = '''chunk = b"x" * (16 << 20)
held = [os.memfd_create(f"held{i}") for i in range(12)]
for fd in held:  # 768 MiB in memory files it never maps
    for _ in range(4):
        os.write(fd, chunk)'''


@pytest.mark.parametrize("what,fill,limit,cause", [
    ("disk", FILL_DISK, {"AKA_SCRATCH_LIMIT": "32M"}, "disk_limit"),
    ("memory", FILL_MEMORY, {"AKA_MEMORY_LIMIT": "512M"}, "memory_limit")])
def test_a_tasks_command_that_fills_the_host_is_stopped_and_blamed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str, fill: str,
        limit: dict[str, str], cause: str) -> None:
    # The candidate's code, run by the task's correctness command, fills the disk or the host's
    # memory (limits lowered so that the test fills little): the command is killed at the
    # limit, the candidate's ``resources`` failure, not the host's.
    if sandbox.landlock_abi() <= 0:
        pytest.skip("no Landlock here: commands cannot be confined")
    for name, value in limit.items():
        monkeypatch.setenv(name, value)
    task = write_task(tmp_path / "tasks" / "akav1" / "scale")
    candidate = tmp_path / "candidate" / "src"
    candidate.mkdir(parents=True)
    (candidate / "kernel.py").write_text(FILLER.format(fill=fill))
    result = api.evaluate_candidate(task, candidate.parent, device="cpu")
    failure = result.evaluation.failure
    assert result.status == "completed" and not result.pass_correctness
    assert failure is not None and failure.kind == "resources" and failure.cause == cause, failure
    assert "was stopped" in failure.message and "over the limit" in failure.message
    step = (result.evaluation.steps or [None])[-1]
    assert step is not None and step.exit is None and step.stopped in failure.message
    assert result.evaluation.unknown_keys() == []


def confined(tmp_path: Path, command: str) -> tuple[Path, object]:
    """``command`` run as a task's command in a workspace of its own (``run_confined``)."""
    from aka_core.evaluation import harness

    folder = tmp_path / "workspace"
    folder.mkdir(exist_ok=True)
    log = tmp_path / "logs" / "step.log"
    log.parent.mkdir(exist_ok=True)
    run = harness.run_confined(command, folder, log, [], "required", timeout=60)
    return folder, run


def test_a_module_in_the_workspace_does_not_run_before_the_sandbox(tmp_path: Path) -> None:
    # The launcher ran with the workspace as its folder, first on its path: a json.py there
    # ran, unconfined, before the sandbox was applied (it read the corpus, wrote anywhere).
    if sandbox.landlock_abi() <= 0:
        pytest.skip("no Landlock here: commands cannot be confined")
    escaped = tmp_path / "escaped.txt"
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "json.py").write_text(
        f"open({str(escaped)!r}, 'w').write('ran before the sandbox')\n"
        "import sys, importlib; sys.path.pop(0); sys.modules.pop('json')\n"
        "globals().update(importlib.import_module('json').__dict__)\n")
    _, run = confined(tmp_path, "true")
    assert run.code == 0 and run.confinement["confined"] is True
    assert not escaped.exists()


def test_what_a_command_leaves_running_ends_with_it(tmp_path: Path) -> None:
    # A grandchild in a session of its own (setsid, a double fork) once outlived the command
    # and the evaluation, free to load the CPUs while the next side was timed.
    if sandbox.landlock_abi() <= 0:
        pytest.skip("no Landlock here: commands cannot be confined")
    import os
    import time

    daemon = ("import os, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              "        open('daemon.pid', 'w').write(str(os.getpid()))\n"
              "        time.sleep(120)\n"
              "    os._exit(0)\n"
              "time.sleep(1)\n")
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "daemon.py").write_text(daemon)
    _, run = confined(tmp_path, "python3 daemon.py")
    assert run.code == 0
    pid = int((folder / "daemon.pid").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break  # killed, not yet collected by its new parent
        time.sleep(0.05)
    alive = Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().rsplit(
        ")", 1)[1].split()[0] != "Z"
    if alive:
        os.kill(pid, 9)
    assert not alive


@pytest.mark.parametrize("make", ["fifo", "link_to_dev_zero", "huge"])
def test_a_performance_report_is_read_within_bounds(tmp_path: Path, make: str) -> None:
    # The report is the side's file: a FIFO hung the judge, a link to /dev/zero filled its
    # memory. Either is now the side's failure, at once.
    import os
    import types

    from aka_core.evaluation import harness

    report = tmp_path / "perf.json"
    if make == "fifo":
        os.mkfifo(report)
    elif make == "link_to_dev_zero":
        report.symlink_to("/dev/zero")
    else:
        report.write_text('{"time_ms": 1.0, "pad": "' + "x" * (2 << 20) + '"}')
    spec = types.SimpleNamespace(report="perf.json", time_key=None)
    with pytest.raises(harness.StepFailed) as failed:
        harness._report_time(tmp_path, spec, "candidate")
    said = {"fifo": "not a regular file", "link_to_dev_zero": "Too many levels of symbolic links",
            "huge": "larger than 1 MiB"}[make]
    assert failed.value.kind == "crashed" and "cannot be read" in str(failed.value)
    assert said in str(failed.value)  # what the report's author reads in the record


def test_a_workspace_that_replaced_the_commands_home_is_not_a_fault_of_aka(
        tmp_path: Path) -> None:
    # A candidate's code replaced the folder that is the commands' home with a file: the next
    # command's set-up raised in aka (an infra_error, retried), not in the candidate's step.
    if sandbox.landlock_abi() <= 0:
        pytest.skip("no Landlock here: commands cannot be confined")
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / ".aka-home").write_text("not a folder")
    _, run = confined(tmp_path, "test -d \"$HOME\"")
    assert run.code == 0
