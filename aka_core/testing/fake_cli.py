"""A fake coding CLI for the tests of CLI agent plugins: no network, credentials or real CLI.

A test installs one fake under the CLI's executable name, describes the CLI once (its
``--version``, its login-status answers, what its headless command line must hold) and gives each
run a ``Script``: the events to print, with delays, stderr text, file edits, child processes,
lingering after the last event, and an exit code. The fake is a small program run with the current
Python (``aka_core/testing/fake_cli_program.py``) that replays it, so a plugin's test supplies only
its CLI's event stream::

    fake = FakeCli.install(tmp / "bin", "claude", version="2.0.14 (Claude Code)",
                           requires=Requires(args=(("-p",),), stdin_prompt=True))
    fake.play(Script.from_file(FIXTURES / "stream_success.jsonl"))
    execution = agent.run(fake.on_path(invocation))
    fake.received(invocation)["argv"]      # what the run got: argv, stdin, cwd, env
    fake.processes()                       # what it left running (its children, its sandbox)

The fake works confined (``aka_core.kits.agent_sandbox``) as well as not: it reads only the files beside
it, writes only in its ``HOME`` (the agent's private home) and its working directory, and its
processes are found by the folder on their command line, not by pids (a confined CLI has pids of
its own namespace).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from aka_core.plugin.records import AgentInvocation
from aka_core.testing.fake_cli_program import PROMPT, RECORD_NAME

Step = Mapping[str, Any]
"""One line of a run script (see ``aka_core.testing.fake_cli_program``)."""

PROGRAM = Path(__file__).with_name("fake_cli_program.py")

__all__ = [
    "PROMPT", "FakeCli", "Reply", "Requires", "Script", "append", "event", "ignore_sigterm",
    "line", "linger", "sleep", "spawn_child", "stderr",
]


# --------------------------------------------------------------------------- script steps


def event(data: Mapping[str, Any]) -> Step:
    """Print ``data`` as one JSON line on stdout."""
    return {"event": dict(data)}


def line(text: str) -> Step:
    """Print ``text`` as it is (a recorded line, or one that is not JSON)."""
    return {"line": text}


def stderr(text: str) -> Step:
    return {"stderr": text}


def sleep(seconds: float) -> Step:
    return {"sleep": seconds}


def append(path: str | Path, text: str) -> Step:
    """Append ``text`` to ``path`` (relative to the CLI's working directory, the workspace)."""
    return {"append": str(path), "text": text}


def spawn_child(*, new_session: bool = False) -> Step:
    """Start a child process that ignores SIGTERM and sleeps (only SIGKILL ends it); with
    ``new_session``, in a session of its own, out of the CLI's process group (a daemon)."""
    return {"spawn": True, "new_session": new_session}


def linger(seconds: float = 600) -> Step:
    """Keep running (sleep) after the steps so far: a CLI that does not exit after its result."""
    return {"linger": seconds}


def ignore_sigterm() -> Step:
    """From here on, SIGTERM does nothing (only SIGKILL ends the CLI)."""
    return {"ignore_sigterm": True}


@attrs.frozen(kw_only=True)
class Script:
    """What the fake does on one headless run: its steps, then exit ``exit_code``; or, with
    ``hang``, a child that ignores SIGTERM, SIGTERM ignored, and a sleep that only the runtime's
    SIGKILL ends (a CLI stuck past its budget)."""

    steps: tuple[Step, ...] = ()
    exit_code: int = 0
    hang: bool = False

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]], **kw: Any) -> Script:
        return cls(steps=tuple(event(e) for e in events), **kw)

    @classmethod
    def from_file(cls, path: Path, **kw: Any) -> Script:
        """A recorded stream (one event a line), printed line by line exactly as recorded."""
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls(steps=tuple(line(text) for text in lines if text.strip()), **kw)

    def then(self, *steps: Step, **changes: Any) -> Script:
        """These steps after the script's own (and ``changes`` to exit_code or hang)."""
        return attrs.evolve(self, steps=(*self.steps, *steps), **changes)

    def after(self, *steps: Step) -> Script:
        """These steps before the script's own."""
        return attrs.evolve(self, steps=(*steps, *self.steps))

    def head(self, count: int, **changes: Any) -> Script:
        """Only the first ``count`` printed lines (a run cut short), other steps dropped."""
        printed = [s for s in self.steps if "event" in s or "line" in s][:count]
        return attrs.evolve(self, steps=tuple(printed), **changes)

    def interleaved(self, raw: Sequence[str]) -> Script:
        """``raw[i]`` printed after the i-th printed line (lines that are not JSON, for example)."""
        steps: list[Step] = []
        pending = list(raw)
        for step in self.steps:
            steps.append(step)
            if pending and ("event" in step or "line" in step):
                steps.append(line(pending.pop(0)))
        steps += [line(text) for text in pending]
        return attrs.evolve(self, steps=tuple(steps))

    @property
    def printed(self) -> list[str]:
        """The stdout lines it prints, as printed."""
        return [json.dumps(s["event"]) if "event" in s else str(s["line"])
                for s in self.steps if "event" in s or "line" in s]

    @property
    def events(self) -> list[dict[str, Any]]:
        """The lines it prints that are JSON objects, parsed: what the runtime gives ``usage``."""
        found = []
        for text in self.printed:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
        return found

    def jsonl(self) -> str:
        steps = list(self.steps)
        if self.hang:
            steps += [spawn_child(), {"ignore_sigterm": True}, {"linger": 600}]
        steps.append({"exit": self.exit_code})
        return "".join(json.dumps(step) + "\n" for step in steps)


# --------------------------------------------------------------------------- the CLI


@attrs.frozen(kw_only=True)
class Reply:
    """A canned answer to one exact command line (``--version``, ``auth status`` ...), given only
    if ``if_exists`` (a path; ``$VARIABLES`` are expanded) exists, when set."""

    argv: tuple[str, ...]
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    if_exists: str | None = None


@attrs.frozen(kw_only=True)
class Requires:
    """What a headless run's command line must hold, as the plugin relies on it: the fake refuses
    one without it (exit 3, the reason on stderr), as the real CLI would.

    ``args``: token sequences that must appear, each contiguous; ``stdin_prompt``: a non-empty
    prompt on stdin; ``last_arg``: the exact last argument, or ``PROMPT`` for a prompt there (not a
    flag, nor the value of one of ``value_flags``); ``cwd_flag``: a flag followed by the absolute
    working directory; ``env``: variables that must be set; ``env_dirs``: variables that must name
    an existing folder.
    """

    args: tuple[tuple[str, ...], ...] = ()
    stdin_prompt: bool = False
    last_arg: str | None = None
    value_flags: tuple[str, ...] = ()
    cwd_flag: str | None = None
    env: tuple[str, ...] = ()
    env_dirs: tuple[str, ...] = ()


@attrs.define
class FakeCli:
    """A fake CLI installed as ``bin_dir/name``."""

    bin_dir: Path
    name: str

    @classmethod
    def install(cls, bin_dir: Path, name: str, *, version: str | None = None,
                replies: Sequence[Reply] = (), requires: Requires = Requires(),
                script: Script = Script()) -> FakeCli:
        """Install the fake in ``bin_dir`` (created; keep it out of the folders a test compares).
        ``version`` adds the reply to ``--version``."""
        bin_dir.mkdir(parents=True, exist_ok=True)
        fake = cls(bin_dir=bin_dir.absolute(), name=name)
        program = PROGRAM.read_text(encoding="utf-8")
        fake.executable.write_text(f"#!{sys.executable}\n{program}", encoding="utf-8")
        fake.executable.chmod(0o755)
        fake.describe(version=version, replies=replies, requires=requires)
        fake.play(script)
        return fake

    @property
    def executable(self) -> Path:
        return self.bin_dir / self.name

    def describe(self, *, version: str | None = None, replies: Sequence[Reply] = (),
                 requires: Requires = Requires()) -> None:
        """Replace the CLI's persona: its replies and what its headless runs require."""
        answers = [*replies, *([Reply(argv=("--version",), stdout=version + "\n")]
                               if version is not None else [])]
        persona = {"replies": [attrs.asdict(r) for r in answers],
                   "requires": attrs.asdict(requires)}
        self.bin_dir.joinpath(self.name + ".cli.json").write_text(
            json.dumps(persona, indent=1), encoding="utf-8")

    def play(self, script: Script, *then: Script) -> None:
        """What the next headless runs do. With more scripts, run ``n`` plays the ``n``-th (the
        last one from then on): the fake counts its runs in a file beside it, which a confined
        CLI cannot write, so use several scripts only with ``confinement: off``."""
        scripts = (script, *then)
        for old in self.bin_dir.glob(self.name + ".run*"):
            old.unlink()
        self.bin_dir.joinpath(self.name + ".run.jsonl").write_text(scripts[-1].jsonl(),
                                                                    encoding="utf-8")
        if then:
            for number, each in enumerate(scripts, start=1):
                self.bin_dir.joinpath(f"{self.name}.run.{number}.jsonl").write_text(
                    each.jsonl(), encoding="utf-8")
            self.bin_dir.joinpath(self.name + ".runs").write_text("0", encoding="utf-8")

    def on_path(self, invocation: AgentInvocation, **env: str) -> AgentInvocation:
        """``invocation`` with the fake's folder first on its ``PATH`` (and ``env`` added)."""
        path = invocation.environment.get("PATH", os.environ.get("PATH", ""))
        return attrs.evolve(invocation, environment={
            **invocation.environment, "PATH": f"{self.bin_dir}{os.pathsep}{path}", **env})

    @staticmethod
    def received(invocation: AgentInvocation) -> dict[str, Any]:
        """What the last headless run of ``invocation`` got: ``argv``, ``stdin``, ``cwd``, ``env``
        (recorded in the agent's private home, the ``HOME`` the runtime gives the CLI)."""
        path = invocation.logs_dir / "agent_home" / RECORD_NAME
        return json.loads(path.read_text(encoding="utf-8"))

    def processes(self) -> list[int]:
        """Host pids of processes still running from this fake: the CLI, its children and a
        sandbox around them (their command lines name its folder)."""
        marker = str(self.bin_dir).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker in cmdline and state not in ("Z", "X"):
                found.append(int(entry.name))
        return found
