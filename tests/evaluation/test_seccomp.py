"""The runners' seccomp filter, applied by ``sandbox.apply`` in a real child process: another
process's limits and priorities stay out of reach, the runner's own stay in it."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aka_core.evaluation import seccomp

pytestmark = pytest.mark.skipif(platform.machine() not in seccomp.TABLES
                                or not sys.platform.startswith("linux"),
                                reason="no seccomp table for this machine")

CHILD = textwrap.dedent("""
    import json, os, resource, sys
    from pathlib import Path
    from aka_core.evaluation import sandbox
    if sys.argv[2] == "off":  # the control: the same sandbox without the filter
        from aka_core.evaluation import seccomp
        seccomp.install = lambda own_pid=None: None
    spec = sandbox.build_spec(scratch=Path(sys.argv[1]), read=[p for p in sys.path if p],
                              protected=[], required=False)
    record = sandbox.apply(spec)
    parent = os.getppid()
    tried = {}
    def attempt(name, call):
        try:
            call()
            tried[name] = "done"
        except OSError as exc:
            tried[name] = exc.strerror
    # Each call on the parent asks for what it has already (a limit, a priority): where one
    # gets through, the test fails on its answer and the test run is left as it was.
    nofile = resource.prlimit(parent, resource.RLIMIT_NOFILE)
    nice = os.getpriority(os.PRIO_PROCESS, parent)
    attempt("prlimit_parent", lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE, nofile))
    attempt("prlimit_parent_cpu", lambda: resource.prlimit(
        parent, resource.RLIMIT_CPU, resource.prlimit(parent, resource.RLIMIT_CPU)))
    attempt("read_parent_limit", lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE))
    attempt("setpriority_parent", lambda: os.setpriority(os.PRIO_PROCESS, parent, nice))
    attempt("setpriority_user", lambda: os.setpriority(os.PRIO_USER, 0, nice))
    attempt("setpriority_group", lambda: os.setpriority(os.PRIO_PGRP, 0, nice))
    attempt("own_limit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    attempt("own_limit_by_pid", lambda: resource.prlimit(os.getpid(), resource.RLIMIT_CORE, (0, 0)))
    attempt("own_priority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))
    attempt("own_priority_by_pid", lambda: os.setpriority(os.PRIO_PROCESS, os.getpid(), 6))
    print(json.dumps({"record": record, "tried": tried}))
""")


def attempts(folder: Path, mode: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(folder), mode], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_without_the_filter_a_confined_process_reaches_its_parents_limits(tmp_path: Path) -> None:
    # What the filter is for: Landlock and the namespaces leave another process's limits open.
    report = attempts(tmp_path, "off")
    assert report["record"]["other_processes"].startswith("unrestricted")
    assert report["tried"]["prlimit_parent"] == "done", report


def test_a_confined_process_cannot_touch_its_parents_limits_or_priority(tmp_path: Path) -> None:
    limits = {r: resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_CPU)}
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    report = attempts(tmp_path, "on")
    assert report["record"]["other_processes"].startswith("seccomp:")
    tried = report["tried"]
    for name in ("prlimit_parent", "prlimit_parent_cpu", "setpriority_parent", "setpriority_user",
                 "setpriority_group"):
        assert tried[name] == "Operation not permitted", (name, tried)
    for name in ("read_parent_limit", "own_limit", "own_limit_by_pid", "own_priority",
                 "own_priority_by_pid"):
        assert tried[name] == "done", (name, tried)
    assert {r: resource.getrlimit(r) for r in limits} == limits
    assert os.getpriority(os.PRIO_PROCESS, 0) == nice


def test_every_jump_of_the_filter_lands_inside_it() -> None:
    for machine in seccomp.TABLES:
        program = seccomp.program(machine, own_pid=4242)
        for at, (code, jt, jf, _k) in enumerate(program):
            if code == 0x06:  # a return
                continue
            assert at + 1 + max(jt, jf) < len(program)
        assert program[-1] == (0x06, 0, 0, 0x00050000 | 1)  # the last word refuses
