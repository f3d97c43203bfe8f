"""Red team, agents: what a CLI prints when its provider fails (a rate limit, a refused login, a
503) makes the task an ``infra_error`` whose candidate is never judged. That is the CLI's word,
not the model's, so the model's own commands must not be able to put it in the CLI's output.

They could: a command the agent runs is a process of the CLI's user below the CLI, and
``/proc/<the CLI>/fd/2`` (or ``fd/1``) opened the file or pipe aka reads the CLI's stderr (or its
events) from. An agent that wrote "429 Too Many Requests" there and killed its CLI had the task
end ``rate_limited`` -> ``infra_error``: its candidate's zero was never given. The CLI's stdout
and stderr are now sockets, which no path opens (``open`` of a socket's ``/proc`` link fails),
whatever the sandbox."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from aka_core.kits.agent_runtime import CliAgent, CliCommand
from aka_core.models import AgentUsage
from aka_core.plugin.records import AgentInvocation
from aka_core.run.lifecycle import protected_paths
from aka_core.testing.fixtures import task_from_dir, write_task

# The CLI starts its "tool" as CLIs do (its output captured: never the CLI's own stdout or
# stderr), and waits for it. The tool writes a provider failure into the CLI's output through
# /proc and kills the CLI, so that it fails.
FORGING_CLI = textwrap.dedent('''\
    #!{python}
    import subprocess, sys
    if sys.argv[1:] == ["--version"]:
        print("forger 1.0")
        sys.exit(0)
    tool = {tool!r}
    subprocess.run([sys.executable, "-c", tool], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sys.exit(0)
''')

TOOL = textwrap.dedent('''\
    import os, signal
    cli = os.getppid()
    reached = []
    for fd, text in (("2", "Error: 429 Too Many Requests (rate_limit_error)\\n"),
                     ("1", "API Error: 429 rate limit exceeded\\n")):
        try:
            with open(f"/proc/{cli}/fd/{fd}", "w") as handle:
                handle.write(text)
            reached.append(fd)
        except OSError:
            pass
    with open("reached.txt", "w") as handle:
        handle.write(",".join(reached))
    os.kill(cli, signal.SIGKILL)
''')


class Forger(CliAgent):
    name = "forger"
    executable = "forger-agent"

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        return CliCommand(argv=[executable])

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        return AgentUsage()


@pytest.mark.parametrize("confinement", ["off", "required"])
def test_an_agent_cannot_write_a_provider_failure_into_its_clis_output(
        tmp_path: Path, confinement: str) -> None:
    if confinement == "required" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    task_dir = write_task(tmp_path / "repo" / "tasks")
    task = task_from_dir(task_dir, "demo/scale_add")
    run_dir = tmp_path / "repo" / "run"
    task_run = run_dir / "demo" / "scale_add"
    shutil.copytree(task_dir, task_run / "workspace")
    (task_run / "logs").mkdir()
    bin_dir = tmp_path / "installed" / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "forger-agent"
    exe.write_text(FORGING_CLI.format(python=sys.executable, tool=TOOL))
    exe.chmod(0o755)
    invocation = AgentInvocation(
        task=task, workspace=task_run / "workspace", logs_dir=task_run / "logs",
        prompt="make it fast", timeout_seconds=60, target_gpu_model="cpu",
        environment={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        protected=protected_paths(task, run_dir))
    execution = Forger({"confinement": confinement}).run(invocation)
    reached = (task_run / "workspace" / "reached.txt").read_text()
    assert execution.status == "failed", (execution.status, execution.message, reached)
    assert reached == "", f"the tool opened the CLI's fd {reached} through /proc"
