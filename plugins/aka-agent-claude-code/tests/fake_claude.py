#!/usr/bin/env python3
"""A stand-in for the ``claude`` CLI: replays recorded stream-json (tests/fixtures/*.jsonl).

Tests copy it to ``<tmp>/bin/claude``. It answers:

- ``claude --version``: a version line, like the real CLI.
- ``claude auth status``: JSON with ``loggedIn``; exit 0 when ``FAKE_CLAUDE_AUTH`` is ``ok``, else
  exit 1 (what the real CLI does when nobody is logged in).
- anything else is a headless run. It first checks that the command line has the flags the
  plugin relies on and that the prompt arrived on stdin; if not, it exits 3 saying what is
  missing. Then it behaves per ``FAKE_CLAUDE_MODE``:

  ``normal``     replay stream_success.jsonl, exit 0
  ``malformed``  the same with four lines that are not JSON objects among the events, exit 0
  ``fail``       replay stream_error.jsonl, a line on stderr, exit 1
  ``auth``       replay stream_auth_failure.jsonl, exit 1
  ``escape``     write ``FAKE_CLAUDE_ESCAPE_PATH`` (outside the workspace), then as ``normal``
  ``hang``       replay stream_partial.jsonl, start a child that sleeps, ignore SIGTERM, sleep

Other variables: ``FAKE_CLAUDE_FIXTURES`` (the fixtures folder) and ``FAKE_CLAUDE_RECORD`` (a file
where it writes what it received: argv, stdin, environment, cwd, its pid and its child's pid).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REQUIRED = (("-p",), ("--output-format", "stream-json"), ("--verbose",),
            ("--permission-mode", "bypassPermissions"))
MALFORMED = (
    "[SandboxDebug] sandbox initialised without network restrictions",
    "plain text that is not JSON",
    '{"type": "assistant", "message": {"id": "msg_cut',
    "[1, 2, 3]",
)


def has(argv: list[str], flag: tuple[str, ...]) -> bool:
    n = len(flag)
    return any(tuple(argv[i:i + n]) == flag for i in range(len(argv) - n + 1))


def replay(name: str, extra_lines: tuple[str, ...] = ()) -> None:
    lines = (Path(os.environ["FAKE_CLAUDE_FIXTURES"]) / name).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        print(line, flush=True)
        if i < len(extra_lines):
            print(extra_lines[i], flush=True)


def record(data: dict) -> None:
    path = os.environ.get("FAKE_CLAUDE_RECORD")
    if path:
        Path(path).write_text(json.dumps(data), encoding="utf-8")


def main() -> int:
    argv = sys.argv[1:]
    if argv == ["--version"]:
        print("2.0.14 (Claude Code)")
        return 0
    if argv[:2] == ["auth", "status"]:
        logged_in = os.environ.get("FAKE_CLAUDE_AUTH") == "ok"
        print(json.dumps({"loggedIn": logged_in, "authMethod": "api_key" if logged_in else "none",
                          "apiProvider": "firstParty"}))
        return 0 if logged_in else 1
    missing = [" ".join(f) for f in REQUIRED if not has(argv, f)]
    if missing:
        print(f"fake claude: the command line lacks {missing}: {argv}", file=sys.stderr)
        return 3
    prompt = sys.stdin.read()
    if not prompt.strip():
        print("Error: Input must be provided either through stdin or as a prompt argument when "
              "using --print", file=sys.stderr)
        return 3
    mode = os.environ.get("FAKE_CLAUDE_MODE", "normal")
    received = {"argv": argv, "stdin": prompt, "env": dict(os.environ), "cwd": os.getcwd(),
                "pid": os.getpid()}
    if mode == "hang":
        child = subprocess.Popen([sys.executable, "-c",
                                  "import signal, time\n"
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                  "time.sleep(600)\n"])
        record({**received, "child_pid": child.pid})
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        replay("stream_partial.jsonl")
        time.sleep(600)
        return 0
    record(received)
    if mode == "escape":
        Path(os.environ["FAKE_CLAUDE_ESCAPE_PATH"]).write_text("written from outside the workspace\n",
                                                              encoding="utf-8")
    if mode in ("normal", "escape"):
        replay("stream_success.jsonl")
        return 0
    if mode == "malformed":
        replay("stream_success.jsonl", MALFORMED)
        return 0
    if mode == "fail":
        replay("stream_error.jsonl")
        print("Error: the model request failed (simulated)", file=sys.stderr)
        return 1
    if mode == "auth":
        replay("stream_auth_failure.jsonl")
        return 1
    print(f"fake claude: unknown FAKE_CLAUDE_MODE {mode!r}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
