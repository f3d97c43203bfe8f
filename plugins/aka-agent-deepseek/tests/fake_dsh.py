#!/usr/bin/env python3
"""A stand-in for DeepSeek Harness's ``dsh`` in tests; it never calls a model.

Tests copy it to ``<tmp>/bin/dsh`` with ``fixtures/`` beside it. Driven the way aka drives the real
CLI (``dsh --profile headless [--patch FILE]... --json - [extra...]``, task on stdin), it checks that
command line (exit 3 with a message when a flag aka relies on is missing), records what it received
in ``$HOME/fake_dsh_call.json``, and replays ``fixtures/<file>.jsonl`` on stdout.

``FAKE_DSH_MODE`` picks the behaviour:
  ok (default)  replay normal.jsonl, exit 0
  malformed     the same with two non-JSON lines among the events, exit 0
  fail          replay fail.jsonl, a provider error on stderr, exit 1
  auth          replay auth.jsonl, MISSING_CREDENTIAL on stderr, exit 1
  hang          ignore SIGTERM, start a child that sleeps, sleep (pids in $HOME/fake_dsh_pids.json)
  escape        append to reference.py in the folder FAKE_DSH_OUTSIDE names, then as ok
``dsh --version`` prints a version line.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

VERSION = "0.2.0-rc.2"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fail_usage(message: str) -> None:
    sys.stderr.write(f"fake dsh: {message}\n")
    sys.exit(3)


def check_argv(args: list[str]) -> list[str]:
    """The flags aka relies on; returns the --patch files."""
    if args[:2] != ["--profile", "headless"]:
        fail_usage(f"expected to start with --profile headless, got {args}")
    if "--json" not in args:
        fail_usage(f"--json missing from {args}")
    if "-" not in args or args.index("-") < args.index("--json"):
        fail_usage(f"the stdin task marker '-' must follow --json: {args}")
    patches = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--patch"]
    for patch in patches:
        rows = json.loads(Path(patch).read_text(encoding="utf-8"))
        if not (isinstance(rows, list) and all("id" in row for row in rows)):
            fail_usage(f"{patch} is not a list of patch rows")
    if os.environ.get("DSH_PERMISSION_MODE") not in ("read-only", "workspace-write",
                                                      "danger-full-access"):
        fail_usage("DSH_PERMISSION_MODE is not set")
    return patches


def replay(name: str, *, malformed: bool = False) -> None:
    lines = (FIXTURES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    if malformed:
        lines.insert(2, "(node:4242) ExperimentalWarning: this line is not JSON")
        lines.insert(len(lines) - 1, "dsh: a stray diagnostic on stdout {")
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> None:
    args = sys.argv[1:]
    if args in (["--version"], ["-V"]):
        print(VERSION)
        return
    patches = check_argv(args)
    prompt = sys.stdin.read()
    if not prompt.strip():
        fail_usage("no task arrived on stdin")
    home = Path(os.environ["HOME"])
    call = {"argv": args, "prompt": prompt, "cwd": os.getcwd(), "env": dict(os.environ),
            "patches": {p: json.loads(Path(p).read_text(encoding="utf-8")) for p in patches}}
    (home / "fake_dsh_call.json").write_text(json.dumps(call, indent=2), encoding="utf-8")

    mode = os.environ.get("FAKE_DSH_MODE", "ok")
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a stuck CLI: only SIGKILL stops it
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (home / "fake_dsh_pids.json").write_text(json.dumps([os.getpid(), child.pid]))
        replay_first = (FIXTURES / "normal.jsonl").read_text(encoding="utf-8").splitlines()[0]
        sys.stdout.write(replay_first + "\n")
        sys.stdout.flush()
        time.sleep(600)
    elif mode == "escape":
        with open(Path(os.environ["FAKE_DSH_OUTSIDE"]) / "reference.py", "a",
                  encoding="utf-8") as f:
            f.write("\n# written by the agent outside its workspace\n")
        replay("normal")
    elif mode == "fail":
        replay("fail")
        sys.stderr.write("dsh: SERVER: DeepSeek API error (HTTP 503)\n")
        sys.exit(1)
    elif mode == "auth":
        replay("auth")
        sys.stderr.write("dsh: MISSING_CREDENTIAL: credential reference DEEPSEEK_API_KEY "
                         "resolves to no value\n")
        sys.exit(1)
    else:
        replay("normal", malformed=mode == "malformed")


if __name__ == "__main__":
    main()
