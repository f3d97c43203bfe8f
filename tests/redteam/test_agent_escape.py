"""Red team, agents: a confined CLI agent (bubblewrap) cannot read the answer key or touch the
host, and can still work: a stand-in CLI tries, from its workspace, everything an agent searching
for the reward would, then builds its candidate with aka selfcheck, and reports what it saw."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from aka_core.kits.agent_runtime import CliAgent, CliCommand
from aka_core.models import AgentUsage
from aka_core.plugin.records import AgentInvocation
from aka_core.run.lifecycle import agent_protected_paths
from aka_core.service import access_token, state_registry
from aka_core.testing.fixtures import task_from_dir, write_task

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("AKA_REQUIRE_SANDBOX"),
    reason="bubblewrap is not installed (apt-get install bubblewrap)")

STAND_IN = textwrap.dedent('''\
    #!{python}
    """A stand-in CLI agent that looks for the answer key, then does honest work."""
    import json, os, socket, subprocess, sys
    if sys.argv[1:] == ["--version"]:
        print("stand-in 1.0")
        sys.exit(0)
    targets = json.loads(os.environ["PROBE_TARGETS"])
    seen = {{}}
    for name, path in targets["read"].items():
        try:
            with open(path) as handle:
                seen[name] = "read: " + handle.read(40)
        except OSError as exc:
            seen[name] = f"denied: {{exc.strerror}}"
    for name, path in targets["write"].items():
        try:
            with open(path, "a") as handle:
                handle.write("agent was here")
            seen[name] = "written"
        except OSError as exc:
            seen[name] = f"denied: {{exc.strerror}}"
    seen["processes_visible"] = len([p for p in os.listdir("/proc") if p.isdigit()])
    try:  # its model's endpoint: the network stays the host's
        with socket.create_connection(("127.0.0.1", int(targets["endpoint_port"])), timeout=5) as s:
            seen["endpoint"] = s.recv(16).decode()
    except OSError as exc:
        seen["endpoint"] = f"unreachable: {{exc}}"
    try:
        os.kill(int(targets["aka_pid"]), 0)
        seen["signal_aka"] = "allowed"
    except OSError as exc:
        seen["signal_aka"] = f"denied: {{exc.strerror}}"
    try:  # bubblewrap's /dev is an in-memory folder as large as half the host's memory
        with open("/dev/aka-agent-file", "w") as handle:
            handle.write("x")
        seen["dev"] = "written"
    except OSError as exc:
        seen["dev"] = f"denied: {{exc.strerror}}"
    fill = targets.get("fill") or {{}}
    if fill.get("shm_mib"):  # more than /dev/shm's size: in-memory files, in no process's size
        try:
            with open("/dev/shm/aka-agent-fill", "wb") as handle:
                for _ in range(fill["shm_mib"]):
                    handle.write(b"x" * (1 << 20))
            seen["shm"] = "filled"
        except OSError as exc:
            seen["shm"] = f"denied: {{exc.strerror}}"
    if fill.get("hold_mib"):  # more than the memory limit: the watch stops it meanwhile
        held = bytearray(fill["hold_mib"] << 20)
        for i in range(0, len(held), 4096):
            held[i] = 1
        import time
        time.sleep(30)
    with open("kernel.py", "a") as handle:
        handle.write("\\n# tuned by the agent\\n")
    if targets.get("selfcheck"):
        done = subprocess.run([sys.executable, "-m", "aka_core.cli", "selfcheck", ".",
                               "--device", "cpu", "--no-timing"], capture_output=True, text=True)
        seen["selfcheck"] = {{"exit": done.returncode, "out": done.stdout[-2000:],
                             "err": done.stderr[-2000:]}}
    with open("report.json", "w") as handle:
        json.dump(seen, handle)
    print(json.dumps({{"type": "result", "is_error": False}}))
''')


class StandIn(CliAgent):
    name = "stand-in"
    executable = "stand-in-agent"

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        return CliCommand(argv=[executable])

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        return AgentUsage()


@pytest.fixture
def run_layout(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A repository (tasks/, tests/solutions/), a run with one task, a host home with a secret."""
    repo = tmp_path / "repo"
    task_dir = write_task(repo / "tasks")
    task = task_from_dir(task_dir, "demo/scale_add")
    solutions = repo / "tests" / "solutions" / "demo" / "scale_add"
    solutions.mkdir(parents=True)
    (solutions / "kernel.py").write_text("SOLUTION = 'the answer key'\n")
    run_dir = repo / "workspace_cpu_stand-in" / "run_1"
    (run_dir / "run.yaml").parent.mkdir(parents=True)
    (run_dir / "run.yaml").write_text("tasks_root: secret\n")
    task_run = run_dir / "demo" / "scale_add"
    shutil.copytree(task_dir, task_run / "workspace")
    shutil.copytree(task_dir, task_run / "baseline")
    (task_run / "logs").mkdir()
    other = run_dir / "demo" / "other_task" / "workspace"
    other.mkdir(parents=True)
    (other / "kernel.py").write_text("OTHER = 'another task'\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine api password hunter2\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(access_token.ENV, raising=False)
    access_token.for_service(8765)  # the token a reward service on this host made, in $HOME
    # A reward service's state folder where the sandbox shows the host (not below /tmp or a
    # home): recorded by the service, hidden; an unrecorded folder beside it stays readable.
    states = []
    for name in ("service-state", "not-a-service"):
        folder = Path("/opt") / f"aka-agent-{name}-{uuid.uuid4().hex[:8]}"
        try:
            folder.mkdir()
        except OSError:
            break
        (folder / "queue.db").write_text("held-out draws of other rollouts\n")
        states.append(folder)
    if states:
        state_registry.record(states[0])
    bin_dir = tmp_path_factory.mktemp("stand-in") / "bin"  # installed apart from the run
    bin_dir.mkdir()
    exe = bin_dir / "stand-in-agent"
    exe.write_text(STAND_IN.format(python=sys.executable))
    exe.chmod(0o755)
    (bin_dir.parent / "installed_tool.py").write_text("# an installed program\n")
    host_tmp_file = Path(f"/tmp/aka-agent-was-here-{uuid.uuid4().hex}")
    endpoint = socket.create_server(("127.0.0.1", 0))  # stands for the model's API
    serving = threading.Thread(target=_serve_hello, args=(endpoint,), daemon=True)
    serving.start()
    yield {"task": task, "task_dir": task_dir, "solutions": solutions, "run_dir": run_dir,
           "states": states,
           "task_run": task_run, "other": other, "home": home, "bin": bin_dir,
           "host_tmp_file": str(host_tmp_file), "endpoint_port": endpoint.getsockname()[1]}
    host_tmp_file.unlink(missing_ok=True)
    endpoint.close()
    for folder in states:
        shutil.rmtree(folder, ignore_errors=True)


def _serve_hello(server: socket.socket) -> None:
    while True:
        try:
            connection, _ = server.accept()
        except OSError:
            return
        with connection:
            connection.sendall(b"hello")


def invoke(layout: dict[str, Any], *, selfcheck: bool = False, fill: dict[str, int] | None = None,
           **options: Any) -> dict[str, Any]:
    task_run = layout["task_run"]
    targets = {
        "read": {"task_yaml": str(layout["task_dir"] / "task.yaml"),
                 "solution": str(layout["solutions"] / "kernel.py"),
                 "run_yaml": str(layout["run_dir"] / "run.yaml"),
                 "other_task": str(layout["other"] / "kernel.py"),
                 "home_secret": str(layout["home"] / ".netrc"),
                 # With it, an agent could ask the reward service for verdicts on the held-out
                 # cases, and read or cancel other rollouts' requests.
                 "service_token": str(access_token.token_file(8765)),
                 **{f"state_{i}": str(folder / "queue.db")
                    for i, folder in enumerate(layout["states"])},
                 "preserved_copy": str(task_run / "baseline" / "task.yaml")},
        # Stand-ins for files an agent must not change (never real ones: if confinement failed,
        # this test must not damage the machine it runs on).
        "write": {"evaluator": str(layout["bin"].parent / "installed_tool.py"),
                  "preserved_copy_write": str(task_run / "baseline" / "reference.py"),
                  "task_source": str(layout["task_dir"] / "reference.py"),
                  "records": str(task_run / "logs" / "agent.jsonl"),
                  "tmp": layout["host_tmp_file"]},
        "aka_pid": os.getpid(), "selfcheck": selfcheck, "fill": fill or {},
        "endpoint_port": layout["endpoint_port"],
    }
    env = {"PATH": f"{layout['bin']}{os.pathsep}{os.environ['PATH']}",
           "PROBE_TARGETS": json.dumps(targets)}
    invocation = AgentInvocation(
        task=layout["task"], workspace=task_run / "workspace", logs_dir=task_run / "logs",
        prompt="make it fast", timeout_seconds=120, environment=env, target_gpu_model="cpu",
        protected=agent_protected_paths(layout["task"], layout["run_dir"]),
        readable=(str(task_run / "baseline"),))
    execution = StandIn({"pass_env": ["PROBE_TARGETS"], **options}).run(invocation)
    report_path = task_run / "workspace" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    return {"execution": execution, "report": report}


def test_a_confined_agent_cannot_read_the_answer_key_nor_write_outside(
        run_layout: dict[str, Any]) -> None:
    outcome = invoke(run_layout)
    execution, seen = outcome["execution"], outcome["report"]
    assert execution.status == "completed", execution.message
    assert execution.confinement and execution.confinement["confined"] is True
    for name in ("task_yaml", "solution", "run_yaml", "other_task", "home_secret",
                 "service_token"):
        assert seen[name].startswith("denied"), (name, seen[name])
    if len(run_layout["states"]) == 2:  # /opt is writable here
        assert seen["state_0"].startswith("denied"), seen["state_0"]  # the service's, recorded
        assert seen["state_1"].startswith("read: "), seen["state_1"]  # the control
    assert seen["preserved_copy"].startswith("read: "), "aka selfcheck needs the preserved copy"
    for name in ("evaluator", "preserved_copy_write"):
        assert seen[name].startswith("denied"), (name, seen[name])
    # Hidden folders are empty in-memory folders inside: writing there changes nothing outside.
    assert "agent was here" not in (run_layout["task_dir"] / "reference.py").read_text()
    assert "agent was here" not in (run_layout["task_run"] / "logs" / "agent.jsonl").read_text()
    from aka_core.kits import agent_sandbox

    if agent_sandbox.sizes_tmpfs(agent_sandbox.bwrap_path() or "bwrap"):
        assert seen["tmp"] == "written", "its own /tmp is private and writable"
        assert "/tmp and /var/tmp 512 MiB" in execution.confinement["in_memory_folders"]
    else:  # a bubblewrap that cannot size an in-memory folder leaves them all read-only
        assert seen["tmp"].startswith("denied")
    assert seen["dev"].startswith("denied"), "/dev is read-only"
    assert not Path(run_layout["host_tmp_file"]).exists(), "the host's /tmp was written"
    assert seen["processes_visible"] < 10, "the host's processes are visible"
    assert seen["signal_aka"].startswith("denied")
    assert seen["endpoint"] == "hello", "a confined agent must still reach its model"
    assert "# tuned by the agent" in (run_layout["task_run"] / "workspace" / "kernel.py").read_text()
    assert "hunter2" not in json.dumps(seen)


def test_a_confined_agent_cannot_fill_the_hosts_memory_through_its_dev_shm(
        run_layout: dict[str, Any]) -> None:
    outcome = invoke(run_layout, fill={"shm_mib": 600})
    assert outcome["execution"].status == "completed", outcome["execution"].message
    assert outcome["report"]["shm"].startswith("denied"), outcome["report"]["shm"]


def test_an_agent_over_the_memory_limit_is_stopped_and_says_so(
        run_layout: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # Its CLI (and whatever it starts) holds 400 MiB under a limit lowered to 256 MiB: killed
    # within a second, the agent step failed, the message saying why (not its budget's end).
    monkeypatch.setenv("AKA_MEMORY_LIMIT", "256M")
    outcome = invoke(run_layout, fill={"hold_mib": 400})
    execution = outcome["execution"]
    assert execution.status == "failed", execution.message
    assert "stopped: it held" in (execution.message or "")
    assert "over the limit of 256.0 MiB (AKA_MEMORY_LIMIT)" in (execution.message or "")
    assert execution.duration_seconds < 20, "stopped by the watch, not at the end of its sleep"


def test_a_confined_agent_still_runs_aka_selfcheck(run_layout: dict[str, Any]) -> None:
    outcome = invoke(run_layout, selfcheck=True)
    check = outcome["report"]["selfcheck"]
    assert check["exit"] == 0, check
    assert "correct:  True" in check["out"], check


def test_confinement_off_is_recorded(run_layout: dict[str, Any]) -> None:
    outcome = invoke(run_layout, confinement="off")
    execution = outcome["execution"]
    assert execution.confinement == {"confined": False, "reason": "confinement: off"}
    assert "ran unconfined" in (execution.message or "")
    assert outcome["report"]["solution"].startswith("read: "), "off means off"


def test_required_without_bwrap_refuses_to_start(run_layout: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from aka_core.kits import agent_sandbox

    monkeypatch.setattr(agent_sandbox, "bwrap_path", lambda: None)
    outcome = invoke(run_layout, confinement="required")
    execution = outcome["execution"]
    assert execution.status == "failed" and "bubblewrap" in (execution.message or "")
    assert outcome["report"] == {}, "the CLI must not have run"
    best_effort = invoke(run_layout)
    assert best_effort["execution"].status == "completed"
    assert best_effort["execution"].confinement == attrs.evolve(best_effort["execution"]).confinement
    assert best_effort["execution"].confinement["confined"] is False
