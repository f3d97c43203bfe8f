"""The shared CLI agent runtime, with a minimal fake CLI: streaming, budgets, statuses, env."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from aka_core.kits.agent_runtime import CliAgent, CliCommand, as_int, strip_ansi
from aka_core.models import AgentUsage
from aka_core.plugin.records import AgentInvocation
from aka_core.testing import FakeCli, Script
from aka_core.testing.fake_cli import ignore_sigterm, linger, sleep, spawn_child, stderr
from aka_core.testing.processes import alive, wait_for

FAKE = textwrap.dedent('''\
    #!/usr/bin/env python3
    import json, os, subprocess, sys, time
    if sys.argv[1:] == ["--version"]:
        print("fakecli 1.2.3"); sys.exit(0)
    if sys.argv[1:] == ["status"]:
        print("logged in as test" if os.environ.get("FAKE_KEY") else "not logged in")
        sys.exit(0 if os.environ.get("FAKE_KEY") else 1)
    mode = os.environ.get("FAKE_MODE", "ok")
    prompt = sys.stdin.read()
    with open(os.path.join(os.environ["HOME"], "env.json"), "w") as f:
        json.dump({"env": dict(os.environ), "prompt": prompt, "cwd": os.getcwd()}, f)
    print(json.dumps({"type": "start"}), flush=True)
    if mode == "hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(os.path.join(os.environ["HOME"], "pids"), "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        time.sleep(600)
    if mode == "junk":
        print("this is not json"); print("[1, 2]")
    if mode == "auth":
        print("Error: not logged in", file=sys.stderr); sys.exit(1)
    if mode == "fail":
        sys.exit(7)
    open("kernel.py", "a").write("# edited\\n")
    print(json.dumps({"type": "result", "usage": {"in": 10, "out": 5}}), flush=True)
''')


class FakeAgent(CliAgent):
    name = "fake"
    executable = "fakecli"
    credential_env = ("FAKE_KEY",)
    auth_status_args = ("status",)

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        return CliCommand(argv=[executable, "run"], stdin=invocation.prompt)

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        final = [e for e in events if e.get("type") == "result"]
        if not final:
            return AgentUsage()
        u = final[-1]["usage"]
        return AgentUsage(input_tokens=as_int(u.get("in")), output_tokens=as_int(u.get("out")))


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    exe = folder / "fakecli"
    exe.write_text(FAKE, encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return folder


@pytest.fixture
def invocation(make_invocation: Any, fake_bin: Path) -> AgentInvocation:
    import attrs

    inv = make_invocation()
    env = {**inv.environment, "PATH": f"{fake_bin}:{os.environ['PATH']}"}
    return attrs.evolve(inv, environment=env, timeout_seconds=30)


def seen(invocation: AgentInvocation) -> dict[str, Any]:
    return json.loads((invocation.logs_dir / "agent_home" / "env.json").read_text())


def test_normal_finish_records_usage_version_and_events(invocation: AgentInvocation) -> None:
    execution = FakeAgent().run(invocation)
    assert execution.status == "completed" and execution.exit_code == 0
    assert execution.version == "fakecli 1.2.3"
    assert execution.usage.input_tokens == 10 and execution.usage.output_tokens == 5
    assert execution.usage.cost_usd is None and execution.usage.turns is None
    lines = (invocation.logs_dir / "agent.jsonl").read_text().splitlines()
    assert [json.loads(x)["type"] for x in lines] == ["start", "result"]
    assert (invocation.workspace / "kernel.py").read_text().endswith("# edited\n")
    assert seen(invocation)["prompt"] == invocation.prompt
    assert Path(seen(invocation)["cwd"]) == invocation.workspace


def test_environment_is_clean_with_credentials_and_a_private_home(
    invocation: AgentInvocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    FakeAgent().run(invocation)
    env = seen(invocation)["env"]
    assert env["FAKE_KEY"] == "sk-test"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["HOME"] == str(invocation.logs_dir / "agent_home")


def test_hang_is_killed_at_the_budget_with_its_children(
    invocation: AgentInvocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    import attrs

    monkeypatch.setenv("FAKE_MODE", "hang")
    started = time.monotonic()
    # Unconfined: the pids the fake writes are the host's (a confined CLI has its own PID
    # namespace, whose processes all die with it: tests/redteam/test_agent_escape.py).
    agent = FakeAgent({"grace_seconds": 1, "pass_env": ["FAKE_MODE"], "confinement": "off"})
    execution = agent.run(attrs.evolve(invocation, timeout_seconds=2))
    assert execution.status == "timed_out" and execution.timed_out
    assert time.monotonic() - started < 15
    pids = [int(p) for p in (invocation.logs_dir / "agent_home" / "pids").read_text().split()]
    time.sleep(0.2)
    assert not [pid for pid in pids if alive(pid)]


def test_malformed_lines_are_kept_and_counted(
    invocation: AgentInvocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "junk")
    execution = FakeAgent({"pass_env": ["FAKE_MODE"]}).run(invocation)
    assert execution.status == "completed"
    assert "2 lines were not JSON" in (execution.message or "")
    text = (invocation.logs_dir / "agent.jsonl").read_text()
    assert "this is not json" in text


@pytest.mark.parametrize(("mode", "status", "code"), [("fail", "failed", 7),
                                                       ("auth", "not_authenticated", 1)])
def test_failures_are_classified(invocation: AgentInvocation, monkeypatch: pytest.MonkeyPatch,
                                 mode: str, status: str, code: int) -> None:
    monkeypatch.setenv("FAKE_MODE", mode)  # passed on only because the options ask for it
    execution = FakeAgent({"pass_env": ["FAKE_MODE"]}).run(invocation)
    assert (execution.status, execution.exit_code) == (status, code)


def test_not_installed(invocation: AgentInvocation) -> None:
    execution = FakeAgent({"executable": "no-such-cli-anywhere"}).run(invocation)
    assert execution.status == "not_installed"
    assert "agent.options.executable" in (execution.message or "")


def test_check_uses_the_cli_status_command(fake_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_KEY", raising=False)
    check = FakeAgent().check()
    assert check.installed and check.version == "fakecli 1.2.3"
    assert check.authenticated is False and not check.ready
    monkeypatch.setenv("FAKE_KEY", "x")
    assert FakeAgent().check().ready
    assert not FakeAgent({"executable": "no-such-cli"}).check().installed


# --------------------------------------------------------------------------- the shared fake CLI


class FinalAgent(CliAgent):
    """A CLI whose ``{"type": "result"}`` event is its last."""

    name = "final"
    executable = "finalcli"

    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        return CliCommand(argv=[executable], stdin=invocation.prompt)

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        return AgentUsage()

    def is_final_event(self, event: Any) -> bool:
        return event.get("type") == "result"


RESULT = {"type": "result", "is_error": False}


@pytest.fixture
def final_cli(tmp_path_factory: pytest.TempPathFactory) -> FakeCli:
    return FakeCli.install(tmp_path_factory.mktemp("final") / "bin", "finalcli",
                           version="finalcli 1.0")


def test_a_cli_without_a_final_event_hook_runs_until_it_exits(
    make_invocation: Any, final_cli: FakeCli
) -> None:
    """The stop after the result is each plugin's choice: without the hook, a CLI that sleeps
    3 s after its result is waited for."""
    invocation = final_cli.on_path(make_invocation())
    final_cli.play(Script.from_events([RESULT]).then(linger(3)))
    execution = FinalAgentWithoutHook().run(invocation)
    assert execution.status == "completed" and execution.duration_seconds >= 3
    assert "after its final result event" not in (execution.message or "")


class FinalAgentWithoutHook(FinalAgent):
    def is_final_event(self, event: Any) -> bool:
        return False


@pytest.mark.parametrize("confinement", ["off", "best_effort"])
def test_a_child_in_a_new_session_does_not_outlive_the_cli(
    make_invocation: Any, final_cli: FakeCli, confinement: str
) -> None:
    """The CLI starts a child in a session of its own (out of its process group) and exits 0:
    the child, found below the CLI while it ran, is killed too."""
    invocation = final_cli.on_path(make_invocation())
    final_cli.play(Script.from_events([RESULT]).after(spawn_child(new_session=True),
                                                     sleep(1.5)))
    execution = FinalAgent({"confinement": confinement}).run(invocation)
    assert (execution.status, execution.exit_code) == ("completed", 0), execution.message
    wait_for(lambda: not final_cli.processes(), 5, "the CLI's child in a new session to be gone")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_confined_cli_gets_its_grace_period(make_invocation: Any, tmp_path: Path) -> None:
    """At the budget, SIGTERM reaches the CLI inside its sandbox: it may save its state before
    SIGKILL. (Sent to the sandbox itself, it would kill the CLI at once.)"""
    bin_dir = tmp_path / "trapbin"
    bin_dir.mkdir()
    exe = bin_dir / "finalcli"
    exe.write_text(TRAP.format(python=sys.executable), encoding="utf-8")
    exe.chmod(0o755)
    invocation = attrs.evolve(make_invocation(timeout_seconds=1), environment={
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    execution = FinalAgent({"grace_seconds": 5}).run(invocation)
    assert execution.confinement and execution.confinement["confined"] is True
    assert execution.status == "timed_out"
    assert (invocation.logs_dir / "agent_home" / "got-sigterm").is_file(), execution.message


TRAP = '''#!{python}
import os, signal, sys, time
if sys.argv[1:] == ["--version"]:
    print("finalcli 1.0"); sys.exit(0)
def saved(signum, frame):
    time.sleep(1)  # saving its session takes a while
    open(os.path.join(os.environ["HOME"], "got-sigterm"), "w").write("saved")
    sys.exit(0)
signal.signal(signal.SIGTERM, saved)
print('{{"type": "start"}}', flush=True)
time.sleep(600)
'''


def test_interrupting_aka_stops_the_cli_and_goes_on(
    make_invocation: Any, final_cli: FakeCli
) -> None:
    """Ctrl-C (or SIGTERM, raised as ``Interrupted``) while the CLI runs: the CLI and its
    child in a new session are stopped, and the interruption reaches the caller."""
    import signal
    import threading

    invocation = final_cli.on_path(make_invocation())
    final_cli.play(Script.from_events([{"type": "start"}]).then(
        spawn_child(new_session=True), ignore_sigterm(), linger()))
    # Python's own Ctrl-C handler, as aka has in a terminal: a process started in the background
    # by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and Python keeps it so.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            execution = FinalAgent({"confinement": "off"}).run(invocation)
            # Said, so that a run which returns instead explains why.
            pytest.fail(f"the run returned after {time.monotonic() - started:.1f} s: "
                        f"{execution.status}: {execution.message}")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 15
    wait_for(lambda: not final_cli.processes(), 5, "the CLI and its child to be gone")


def test_provider_failures_are_read_from_stderr_not_from_events(
    make_invocation: Any, final_cli: FakeCli
) -> None:
    invocation = final_cli.on_path(make_invocation())
    agent = FinalAgent()
    cases = [
        ("Error: 429 Too Many Requests", "rate_limited"),
        ("Error: upstream 503 Service Unavailable", "infra_error"),
        ("Error: not logged in", "not_authenticated"),
        ("Error: the tool crashed", "failed"),
    ]
    for text, status in cases:
        final_cli.play(Script.from_events([{"type": "text", "text": "401 Unauthorized"}],
                                          exit_code=1).then(stderr(text)))
        execution = agent.run(invocation)
        assert execution.status == status, (text, execution.message)
    final_cli.play(Script.from_events([{"type": "text", "text": "HTTP 429 and 503, unauthorized"}],
                                      exit_code=1))
    assert agent.run(invocation).status == "failed"


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[1;31mError\x1b[0m: \x1b]8;;https://x\x07link\x1b]8;;\x07 \x1b(Bok") == (
        "Error: link ok")


def test_a_result_just_before_the_budget_is_not_a_time_out(
    make_invocation: Any, final_cli: FakeCli
) -> None:
    invocation = final_cli.on_path(make_invocation(timeout_seconds=2))
    final_cli.play(Script.from_events([RESULT]).after(sleep(1.5)).then(linger()))
    execution = FinalAgent({"grace_seconds": 1}).run(invocation)
    assert (execution.status, execution.timed_out) == ("completed", False), execution.message
    assert "after its final result event" in (execution.message or "")
