#!/usr/bin/env python3
"""A stand-in for ``cursor-agent`` in tests: replays a recorded stream-json output.

Copied by the tests to ``<tmp>/bin/cursor-agent``. It answers ``--version`` and ``status`` like
the real CLI, and otherwise checks that its command line holds the flags the plugin relies on
(``--print``, ``--output-format stream-json``, ``--force``, ``--trust``, ``--workspace`` = its
cwd, the prompt last), exiting 3 with a message on stderr when it does not.

Environment:
  FAKE_CURSOR_MODE     normal (default) | hang | fail | malformed | escape | auth
  FAKE_CURSOR_FIXTURE  the JSON-lines file to replay
  FAKE_CURSOR_RECORD   where to write {argv, env, cwd, pid, child_pid} as JSON
  FAKE_CURSOR_ESCAPE   escape mode: the folder to write ``escaped.txt`` into
  FAKE_CURSOR_STATUS   for ``status``: logged_in (default) | logged_out | error
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

VERSION = "2026.04.17-787b533"
AUTH_ERROR = ("Error: Authentication required. Please run 'agent login' first, or set "
              "CURSOR_API_KEY environment variable.")


def fail_usage(message: str) -> None:
    print(f"fake cursor-agent: argv {sys.argv[1:]}", file=sys.stderr)
    print(f"fake cursor-agent: {message}", file=sys.stderr)
    sys.exit(3)


def value_after(args: list[str], flag: str) -> str | None:
    at = args.index(flag) if flag in args else -1
    return args[at + 1] if 0 <= at < len(args) - 1 else None


def check_argv(args: list[str]) -> None:
    if "--print" not in args and "-p" not in args:
        fail_usage("print mode (--print) is missing")
    if value_after(args, "--output-format") != "stream-json":
        fail_usage("--output-format stream-json is missing")
    if not {"--force", "-f", "--yolo"} & set(args):
        fail_usage("--force is missing")
    if "--trust" not in args:
        fail_usage("--trust is missing")
    workspace = value_after(args, "--workspace")
    if workspace is None:
        fail_usage("--workspace is missing")
    elif Path(workspace).resolve() != Path.cwd().resolve():
        fail_usage(f"--workspace {workspace} is not the cwd {Path.cwd()}")
    prompt = args[-1] if args else ""
    if not prompt.strip() or prompt.startswith("-") or args[-2:-1] in (["--model"], ["--sandbox"],
                                                                       ["--workspace"]):
        fail_usage("the prompt did not arrive as the last argument")


def record(extra: dict[str, object]) -> None:
    path = os.environ.get("FAKE_CURSOR_RECORD")
    if path:
        data = {"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(),
                "pid": os.getpid(), **extra}
        Path(path).write_text(json.dumps(data), encoding="utf-8")


def replay(lines: list[str], malformed: bool = False) -> None:
    for i, line in enumerate(lines):
        print(line, flush=True)
        if malformed and i in (0, 2):
            print(f"T: not a JSON event ({i})", flush=True)
    if malformed:
        print("{truncated", flush=True)


def status() -> None:
    answer = os.environ.get("FAKE_CURSOR_STATUS", "logged_in")
    if answer == "error":
        print("Error: could not reach the Cursor API", file=sys.stderr)
        sys.exit(1)
    # The real CLI exits 0 whether or not anybody is logged in: the text says which.
    print("Not logged in" if answer == "logged_out" else "\u2713 Logged in as someone@example.invalid")


def main() -> None:
    args = sys.argv[1:]
    if args in (["--version"], ["-v"]):
        print(VERSION)
        return
    if args[:1] == ["status"]:
        status()
        return
    check_argv(args)
    mode = os.environ.get("FAKE_CURSOR_MODE", "normal")
    fixture = os.environ.get("FAKE_CURSOR_FIXTURE")
    lines = Path(fixture).read_text(encoding="utf-8").splitlines() if fixture else []
    if mode == "hang":
        # Ignore SIGTERM (inherited by the child) so that only SIGKILL of the group ends both.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        record({"child_pid": child.pid})
        replay(lines[:1])
        time.sleep(600)
        return
    record({})
    if mode == "auth":
        print(AUTH_ERROR, file=sys.stderr)
        sys.exit(1)
    if mode == "fail":
        replay(lines[:2])
        print("Error: the model request failed", file=sys.stderr)
        sys.exit(7)
    if mode == "escape":
        target = Path(os.environ["FAKE_CURSOR_ESCAPE"])
        (target / "escaped.txt").write_text("written from outside the workspace\n",
                                            encoding="utf-8")
    replay(lines, malformed=mode == "malformed")


if __name__ == "__main__":
    main()
