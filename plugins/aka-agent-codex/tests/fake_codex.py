#!/usr/bin/env python3
"""A stand-in for the ``codex`` CLI in tests: replays recorded ``codex exec --json`` output.

The tests copy it to ``<tmp>/bin/codex`` (with ``fixtures/`` beside it). It answers
``codex --version`` and ``codex login status`` (logged in when ``$CODEX_HOME/auth.json`` exists), and for
``codex exec`` first checks the command line the agent relies on (exit 3 with a message when a
flag or the prompt is missing), records what it received in ``$HOME/fake_codex_record.json``,
then acts by ``FAKE_CODEX_MODE``:

- ``normal`` (default): edits kernel.py in its working directory, replays exec_completed.jsonl;
- ``malformed``: the same, with three lines that are not JSON objects among the events;
- ``fail``: replays exec_failed.jsonl and exits 1;
- ``auth``: replays exec_unauthorized.jsonl, complains on stderr and exits 1;
- ``rerouted``: replays exec_rerouted.jsonl;
- ``hang``: starts a turn, starts a child, writes both pids to ``$HOME/fake_codex_pids.json``,
  ignores SIGTERM and sleeps (so only the budget's SIGKILL ends it);
- ``touch``: writes ``FAKE_CODEX_TOUCH`` (a path outside the workspace), then as ``normal``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VERSION = "codex-cli 0.130.0"
REQUIRED_FLAGS = ("--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox")
MALFORMED = ("Reading prompt from stdin...", '{"type":"item.completed","item":{"id":', "[1, 2, 3]")


def fail_usage(message: str) -> None:
    print(f"fake codex: {message}", file=sys.stderr)
    sys.exit(3)


def check_exec_argv(args: list[str]) -> None:
    missing = [flag for flag in REQUIRED_FLAGS if flag not in args]
    if missing:
        fail_usage(f"missing {', '.join(missing)} in {args}")
    if "--cd" not in args or args.index("--cd") + 1 >= len(args):
        fail_usage(f"missing --cd DIR in {args}")
    root = Path(args[args.index("--cd") + 1])
    if not root.is_absolute() or root.resolve() != Path.cwd().resolve():
        fail_usage(f"--cd {root} is not the absolute working directory {Path.cwd()}")
    for i, arg in enumerate(args):
        if arg == "-c" and (i + 1 >= len(args) or "=" not in args[i + 1]):
            fail_usage(f"-c needs key=value in {args}")
    if args[-1] != "-":
        fail_usage(f"the prompt must come from stdin ('-' last), got {args[-1]!r}")


def replay(name: str, malformed: bool = False) -> None:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        print(line, flush=True)
        if malformed and i < len(MALFORMED):
            print(MALFORMED[i], flush=True)


def hang(home: Path) -> None:
    replay_lines = (FIXTURES / "exec_completed.jsonl").read_text(encoding="utf-8").splitlines()
    for line in replay_lines[:2]:  # thread.started, turn.started
        print(line, flush=True)
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    (home / "fake_codex_pids.json").write_text(
        json.dumps({"cli": os.getpid(), "child": child.pid}), encoding="utf-8")
    time.sleep(600)


def run_exec(args: list[str]) -> int:
    check_exec_argv(args)
    prompt = sys.stdin.read()
    if not prompt.strip():
        fail_usage("no prompt arrived on stdin")
    codex_home = os.environ.get("CODEX_HOME", "")
    if not codex_home or not Path(codex_home).is_dir():
        print(f'Error loading configuration: CODEX_HOME points to "{codex_home}", but that path '
              "does not exist", file=sys.stderr)
        return 1
    home = Path(os.environ["HOME"])
    (home / "fake_codex_record.json").write_text(json.dumps(
        {"argv": args, "prompt": prompt, "cwd": os.getcwd(), "env": dict(os.environ)}),
        encoding="utf-8")
    mode = os.environ.get("FAKE_CODEX_MODE", "normal")
    if mode == "hang":
        hang(home)
    if mode == "fail":
        replay("exec_failed.jsonl")
        return 1
    if mode == "auth":
        replay("exec_unauthorized.jsonl")
        print("ERROR: unexpected status 401 Unauthorized: Incorrect API key provided",
              file=sys.stderr)
        return 1
    if mode == "rerouted":
        replay("exec_rerouted.jsonl")
        return 0
    if mode == "touch":
        Path(os.environ["FAKE_CODEX_TOUCH"]).write_text("planted by the agent\n", encoding="utf-8")
    kernel = Path("kernel.py")
    if kernel.is_file():
        kernel.write_text(kernel.read_text(encoding="utf-8") + "\n# reviewed by codex\n",
                          encoding="utf-8")
    replay("exec_completed.jsonl", malformed=mode == "malformed")
    return 0


def main(args: list[str]) -> int:
    if args == ["--version"]:
        print(VERSION)
        return 0
    if args == ["login", "status"]:  # like Codex: the login stored in $CODEX_HOME/auth.json
        home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        if not (home / "auth.json").is_file():
            print("Not logged in", file=sys.stderr)
            return 1
        print("Logged in using an API key - sk-proj-***WXYZ", file=sys.stderr)
        return 0
    if args[:1] == ["exec"]:
        return run_exec(args[1:])
    fail_usage(f"unexpected arguments {args}")
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
