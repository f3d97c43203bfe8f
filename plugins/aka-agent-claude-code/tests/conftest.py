"""Fixtures: a fake ``claude`` on PATH (a copy of fake_claude.py) and what it was given."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from aka_core.records import AgentInvocation

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
FAKE_SOURCE = HERE / "fake_claude.py"
FAKE_VARS = ("FAKE_CLAUDE_MODE", "FAKE_CLAUDE_FIXTURES", "FAKE_CLAUDE_RECORD",
             "FAKE_CLAUDE_ESCAPE_PATH", "FAKE_CLAUDE_AUTH")
"""Variables the fake reads; the agent passes them through to it with ``pass_env``."""
CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")


@attrs.define
class FakeClaude:
    """The fake CLI of one test. Its files live outside the test's ``tmp_path``, so the
    contract's check that nothing outside the workspace changes is not disturbed by them."""

    bin_dir: Path
    record_path: Path
    monkeypatch: pytest.MonkeyPatch

    @property
    def executable(self) -> Path:
        return self.bin_dir / "claude"

    def mode(self, mode: str, **env: str) -> None:
        self.monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
        for key, value in env.items():
            self.monkeypatch.setenv(key, value)

    def options(self, **extra: Any) -> dict[str, Any]:
        """Agent options that let the fake's variables through (1 s between SIGTERM and SIGKILL)."""
        return {"pass_env": list(FAKE_VARS), "grace_seconds": 1, **extra}

    def invocation(self, make_invocation: Callable[..., AgentInvocation], *,
                   timeout_seconds: float = 60.0, path: str | None = None) -> AgentInvocation:
        """A fresh invocation whose PATH starts with the fake's folder (or is ``path``)."""
        invocation = make_invocation(timeout_seconds=timeout_seconds)
        env = dict(invocation.environment)
        env["PATH"] = path if path is not None else f"{self.bin_dir}{os.pathsep}{env['PATH']}"
        return attrs.evolve(invocation, environment=env)

    def received(self) -> dict[str, Any]:
        """What the fake got on its last run: argv, stdin, environment, cwd, pid(s)."""
        return json.loads(self.record_path.read_text(encoding="utf-8"))


@pytest.fixture
def fake(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    root = tmp_path_factory.mktemp("fake-claude")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shutil.copyfile(FAKE_SOURCE, bin_dir / "claude")
    (bin_dir / "claude").chmod(0o755)
    for key in CREDENTIALS:  # the developer's own keys must not leak into the tests
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("FAKE_CLAUDE_FIXTURES", str(FIXTURES))
    monkeypatch.setenv("FAKE_CLAUDE_RECORD", str(root / "received.json"))
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "normal")
    monkeypatch.setenv("FAKE_CLAUDE_AUTH", "ok")
    return FakeClaude(bin_dir=bin_dir, record_path=root / "received.json", monkeypatch=monkeypatch)
