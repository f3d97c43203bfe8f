"""The shared CLI agent runtime, with a minimal fake CLI: streaming, budgets, statuses, env."""

from __future__ import annotations

import json
import os
import stat
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from aka_core.agent_runtime import CliAgent, CliCommand, as_int
from aka_core.models import AgentUsage
from aka_core.records import AgentInvocation
from aka_core.testing.processes import alive

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
