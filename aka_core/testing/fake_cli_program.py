"""The fake coding CLI that ``aka_core.testing.fake_cli`` installs for a test (standard library only).

It is copied to ``<bin>/<name>`` with the current Python on its ``#!`` line, beside two files the
test writes:

- ``<name>.cli.json``, the CLI's persona: canned ``replies`` to whole command lines
  (``--version``, a login-status command ...) and what a headless run ``requires`` of its command
  line, stdin and environment;
- ``<name>.run.jsonl``, the script of a headless run (or, when ``<name>.runs`` counts the runs,
  ``<name>.run.<n>.jsonl`` for run ``n`` while there is one), one step a line: ``{"event": {...}}``
  (printed as one JSON line), ``{"line": "..."}`` (printed as it is), ``{"stderr": "..."}``,
  ``{"sleep": s}``, ``{"append": path, "text": ...}`` (relative to its working directory),
  ``{"spawn": true}`` (a child that ignores SIGTERM and sleeps; with ``"new_session": true`` in a
  session of its own, out of the CLI's process group), ``{"ignore_sigterm": true}``,
  ``{"linger": s}`` (sleep) and ``{"exit": code}``.

A command line that misses what the persona requires exits 3 with the reason on stderr, as a real
CLI would refuse it. A headless run writes what it received (argv, stdin, cwd, environment) to
``$HOME/fake-cli-run.json`` before its first step; its children carry the folder of the fake on
their command line, so a test can find every process the fake left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).absolute()
RECORD_NAME = "fake-cli-run.json"
CHILD = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"
PROMPT = "<prompt>"
"""``requires.last_arg``: the last argument is the prompt (not empty, not a flag, not a value)."""


def refuse(reason: str) -> None:
    # The reason last: the runtime keeps only the tail of stderr in its message.
    print(f"fake {HERE.name}: argv {sys.argv[1:]}\nfake {HERE.name}: {reason}", file=sys.stderr,
          flush=True)
    sys.exit(3)


def reply(replies: list[dict[str, Any]], argv: list[str]) -> int | None:
    """The exit code of the first reply to this exact command line, or None (a headless run)."""
    for answer in replies:
        if answer["argv"] != argv:
            continue
        condition = answer.get("if_exists")
        if condition and not Path(os.path.expandvars(condition)).exists():
            continue
        sys.stdout.write(answer.get("stdout", ""))
        sys.stderr.write(answer.get("stderr", ""))
        return int(answer.get("exit_code", 0))
    return None


def contains(argv: list[str], tokens: list[str]) -> bool:
    n = len(tokens)
    return any(argv[i:i + n] == tokens for i in range(len(argv) - n + 1))


def check(requires: dict[str, Any], argv: list[str], stdin: str) -> None:
    """Refuse the command line the way the real CLI would if it lacks what the plugin relies on."""
    for tokens in requires.get("args", []):
        if not contains(argv, tokens):
            refuse(f"missing {' '.join(tokens)}")
    if requires.get("stdin_prompt") and not stdin.strip():
        refuse("no prompt on stdin")
    last = requires.get("last_arg")
    if last == PROMPT:
        value_of = len(argv) >= 2 and argv[-2] in requires.get("value_flags", [])
        if not argv or not argv[-1].strip() or argv[-1].startswith("-") or value_of:
            refuse("the prompt is not the last argument")
    elif last is not None and (not argv or argv[-1] != last):
        refuse(f"the last argument is not {last}")
    flag = requires.get("cwd_flag")
    if flag:
        at = argv.index(flag) if flag in argv[:-1] else -1
        folder = Path(argv[at + 1]) if at >= 0 else None
        if folder is None or not folder.is_absolute() or folder.resolve() != Path.cwd().resolve():
            refuse(f"{flag} is not followed by the absolute working directory {Path.cwd()}")
    for name in requires.get("env", []):
        if not os.environ.get(name):
            refuse(f"{name} is not set")
    for name in requires.get("env_dirs", []):
        if not Path(os.environ.get(name) or "/nonexistent").is_dir():
            refuse(f"{name} does not name an existing folder")


def record(argv: list[str], stdin: str) -> None:
    home = os.environ.get("HOME")
    if not home:
        return
    data = {"argv": argv, "stdin": stdin, "cwd": os.getcwd(), "env": dict(os.environ)}
    try:
        Path(home, RECORD_NAME).write_text(json.dumps(data), encoding="utf-8")
    except OSError as exc:  # a run must not depend on it; the test that reads it will say
        print(f"fake {HERE.name}: cannot record the run: {exc}", file=sys.stderr, flush=True)


def play(steps: list[dict[str, Any]]) -> int:
    for step in steps:
        if "event" in step:
            print(json.dumps(step["event"]), flush=True)
        elif "line" in step:
            print(step["line"], flush=True)
        elif "stderr" in step:
            print(step["stderr"], file=sys.stderr, flush=True)
        elif "sleep" in step:
            time.sleep(float(step["sleep"]))
        elif "append" in step:
            with open(step["append"], "a", encoding="utf-8") as handle:
                handle.write(step["text"])
        elif "spawn" in step:
            subprocess.Popen([sys.executable, "-c", CHILD, str(HERE.parent)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=bool(step.get("new_session")))
        elif "ignore_sigterm" in step:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif "linger" in step:
            time.sleep(float(step["linger"]))
        elif "exit" in step:
            return int(step["exit"])
        else:
            refuse(f"unknown script step {step}")
    return 0


def main() -> int:
    argv = sys.argv[1:]
    persona = json.loads(HERE.with_name(HERE.name + ".cli.json").read_text(encoding="utf-8"))
    code = reply(persona.get("replies", []), argv)
    if code is not None:
        return code
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    check(persona.get("requires", {}), argv, stdin)
    record(argv, stdin)
    script = HERE.with_name(HERE.name + ".run.jsonl").read_text(encoding="utf-8")
    counter = HERE.with_name(HERE.name + ".runs")
    if counter.exists():  # a sequence of runs (only where the CLI may write beside itself)
        number = int(counter.read_text() or 0) + 1
        counter.write_text(str(number))
        numbered = HERE.with_name(f"{HERE.name}.run.{number}.jsonl")
        if numbered.exists():
            script = numbered.read_text(encoding="utf-8")
    return play([json.loads(line) for line in script.splitlines() if line.strip()])


if __name__ == "__main__":
    sys.exit(main())
