"""The OOM killer's order: a candidate's processes first, a baseline's next, the judge last.

A candidate that fills the host's memory from many small processes would otherwise have the
kernel's OOM killer take the largest process (its judge, or the baseline's runner) and so turn its
own failure into an ``infra_error`` or a task's failure. Nothing here fills memory: the tests read
the scores the processes get and whether a runner can lower its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from aka_core.evaluation import sandbox, sides
from aka_core.evaluation.evaluate import die_with_parent

pytestmark = pytest.mark.skipif(not Path("/proc/self/oom_score_adj").exists(),
                                reason="no /proc/<pid>/oom_score_adj on this system")

# A runner's view: it confines itself, starts a child (which inherits the score), then tries to
# lower its own score back to the judge's.
CHILD = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from aka_core.evaluation import sandbox
    if sys.argv[2] == "self":  # the control: the runner raises its own score, unprivileged
        sandbox._drop_capabilities()
        Path("/proc/self/oom_score_adj").write_text("1000")
    spec = sandbox.build_spec(scratch=Path(sys.argv[1]), read=[p for p in sys.path if p],
                              protected=[], required=False)
    record = sandbox.apply(spec)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, Path("/proc/self/oom_score_adj").read_bytes())
        os._exit(0)
    os.waitpid(pid, 0)
    inherited = int(os.read(read, 64))
    try:
        Path("/proc/self/oom_score_adj").write_text("0")
        lowered = "done"
    except OSError as exc:
        lowered = exc.strerror
    print(json.dumps({"record": record.get("out_of_memory"), "inherited": inherited,
                      "lowered": lowered,
                      "now": int(Path("/proc/self/oom_score_adj").read_text())}))
""")


def confined_child(tmp_path: Path, mode: str) -> dict[str, Any]:
    preexec = die_with_parent(os.getpid(), 1000 if mode == "judge" else None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), mode],
                          capture_output=True, text=True, timeout=60, preexec_fn=preexec,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def holds_sys_resource() -> bool:
    return sandbox._holds_capability(sandbox.CAP_SYS_RESOURCE)


def test_a_candidates_processes_outrank_the_baselines_and_the_judges() -> None:
    assert sandbox.oom_score_adj("candidate") == sandbox.oom_score_adj("candidate builder") == 1000
    assert sandbox.oom_score_adj("baseline") == sandbox.oom_score_adj("baseline builder") == 500
    assert sandbox.OOM_SCORE_ADJ["agent"] == 1000
    judge = int(Path("/proc/self/oom_score_adj").read_text())
    assert judge < sandbox.OOM_SCORE_ADJ["baseline"] < sandbox.OOM_SCORE_ADJ["candidate"]


def test_the_judges_runners_start_with_their_sides_score(tmp_path: Path) -> None:
    # Read before the runner is told anything: the score is there before any side's code runs.
    for name, score in (("candidate", 1000), ("baseline", 500), ("candidate builder", 1000)):
        scratch = tmp_path / name.replace(" ", "-")
        scratch.mkdir()
        runner = sides.RunnerProcess(name, scratch=scratch, env=dict(os.environ),
                                     log_path=tmp_path / f"{scratch.name}.log")
        try:
            assert int(Path(f"/proc/{runner.proc.pid}/oom_score_adj").read_text()) == score
        finally:
            runner.kill()


def test_the_score_reaches_what_a_runner_starts_and_the_record(tmp_path: Path) -> None:
    report = confined_child(tmp_path, "judge")
    assert report["inherited"] == 1000
    assert report["record"].startswith("oom_score_adj 1000")


@pytest.mark.skipif(not holds_sys_resource(),
                    reason="the lock needs aka to hold CAP_SYS_RESOURCE (a container's root "
                           "may lack it: the CPU CI machines' and the H100 machines' do)")
def test_a_runner_cannot_lower_the_score_it_was_given(tmp_path: Path) -> None:
    # The control: a score the runner raised itself, without the capability, it may undo; it
    # would then meet the OOM killer as the judge's equal.
    (tmp_path / "control").mkdir()
    control = confined_child(tmp_path / "control", "self")
    assert control["lowered"] == "done" and control["now"] == 0, control
    given = confined_child(tmp_path, "judge")
    assert given["record"] == "oom_score_adj 1000, which it cannot lower"
    assert given["lowered"] == "Permission denied" and given["now"] == 1000, given


def test_the_record_says_where_a_runner_could_lower_its_score(tmp_path: Path) -> None:
    # Where aka lacks CAP_SYS_RESOURCE, the score is only a first line: the record says so.
    report = confined_child(tmp_path, "judge")
    if holds_sys_resource():
        assert report["record"] == "oom_score_adj 1000, which it cannot lower"
    else:
        assert report["record"] == ("oom_score_adj 1000; it could lower it (this host's aka "
                                    "lacks CAP_SYS_RESOURCE)")
        assert report["lowered"] == "done"


def test_an_agents_cli_starts_with_a_candidates_score(tmp_path: Path) -> None:
    from aka_core.kits import agent_runtime

    cmd = agent_runtime.CliCommand(argv=[sys.executable, "-c",
                                         "print(open('/proc/self/oom_score_adj').read())"])
    proc = agent_runtime._launch(cmd, tmp_path, dict(os.environ), subprocess.DEVNULL)
    out, _ = proc.communicate(timeout=60)
    assert int(out) == sandbox.OOM_SCORE_ADJ["agent"] == 1000
