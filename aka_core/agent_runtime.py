"""The shared runtime of CLI agents: launch a CLI headless in the workspace and account for it.

A CLI agent plugin subclasses ``CliAgent`` and says only what differs between CLIs: the command
line, which credentials it reads, where it keeps its configuration, how to ask its version and
login status, and how to read usage from its own events. The runtime does the rest the same way for
every CLI:

- runs the CLI in the task workspace, in a process group of its own, with a clean environment
  (only what it needs, its credentials passed through, a private HOME/config folder);
- streams its stdout, one JSON event a line, to ``logs/agent.jsonl`` as it arrives (a line that is
  not JSON is kept, wrapped, and counted); stderr goes to ``logs/agent.stderr.log``;
- stops it at the time budget: SIGTERM to the whole group, a grace period, then SIGKILL; after a
  normal exit, whatever the CLI left running in its group is killed too;
- records ``AgentExecution`` (status, exit code, duration, version) and usage taken only from what
  the CLI itself reported: a value it did not report is None, never a guess.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from aka_core.models import AgentExecution, AgentUsage
from aka_core.records import AgentInvocation

GRACE_SECONDS = 10.0
VERSION_TIMEOUT = 20.0
MAX_EVENTS_KEPT = 20_000
KEEP_FIRST_EVENTS = 50


@attrs.frozen(kw_only=True)
class CliCommand:
    """One launch of a CLI: its argv, what to write on stdin, extra environment."""

    argv: Sequence[str]
    stdin: str | None = None
    env: Mapping[str, str] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class AgentCheck:
    """What ``aka check-agents`` reports for one agent."""

    agent: str
    installed: bool
    version: str | None = None
    authenticated: bool | None = None
    detail: str = ""

    @property
    def ready(self) -> bool:
        return self.installed and self.authenticated is not False


@attrs.define
class CliRun:
    """What one launch produced (parsed events, counts, exit)."""

    events: list[dict[str, Any]] = attrs.Factory(list)
    """Parsed events; past ``MAX_EVENTS_KEPT`` only the latest are kept (all are in agent.jsonl)."""
    dropped_events: int = 0
    malformed_lines: int = 0
    exit_code: int | None = None
    timed_out: bool = False
    duration_seconds: float = 0.0
    stderr_tail: str = ""


def common_agent_options_schema(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options every CLI agent takes, plus its own (``extra``)."""
    props: dict[str, Any] = {
        "executable": {"type": "string", "minLength": 1,
                       "description": "The CLI to run (a name on PATH or a path)."},
        "model": {"type": "string", "minLength": 1, "description": "Model name passed to the CLI."},
        "extra_args": {"type": "array", "items": {"type": "string"},
                       "description": "Arguments appended to the CLI's command line."},
        "grace_seconds": {"type": "number", "minimum": 0,
                          "description": "Seconds between SIGTERM and SIGKILL at the time budget."},
        "config_dir": {"type": "string", "minLength": 1,
                       "description": "Use this folder as the CLI's configuration folder (for a "
                                      "login stored on disk) instead of a fresh private one."},
        "pass_env": {"type": "array", "items": {"type": "string"},
                     "description": "More environment variables to pass through to the CLI."},
        "confinement": {"enum": ["required", "best_effort", "off"],
                        "description": "Confine the CLI and what it runs in bubblewrap "
                                       "(aka_core.agent_sandbox): required fails the agent step "
                                       "where bwrap is missing; best_effort (default) runs it "
                                       "unconfined there and says so; off never confines."},
        "read_paths": {"type": "array", "items": {"type": "string", "minLength": 1},
                       "description": "More folders a confined CLI may read where they would be "
                                      "hidden (a toolchain in the home folder)."},
    }
    props.update(extra or {})
    return {"type": "object", "additionalProperties": False, "properties": props}


class CliAgent:
    """Base of CLI agents. Subclasses set the class attributes and implement ``command`` and
    ``usage``; ``run`` and ``check`` are shared."""

    name: ClassVar[str] = "cli"
    executable: ClassVar[str] = ""
    credential_env: ClassVar[tuple[str, ...]] = ()
    """Environment variables holding credentials, passed through when set."""
    config_dir_env: ClassVar[str | None] = None
    """The variable that points the CLI at its configuration folder, where it has one."""
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    auth_status_args: ClassVar[tuple[str, ...] | None] = None
    auth_failure_markers: ClassVar[tuple[str, ...]] = (
        "not logged in", "please log in", "unauthorized", "invalid api key",
        "authentication failed", "authentication_error", "status 401", "401 unauthorized",
    )

    def __init__(self, options: Mapping[str, Any] | None = None):
        self.options = dict(options or {})

    # ------------------------------------------------------------------ to implement
    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        raise NotImplementedError

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        """Usage as the CLI reported it in ``events``; None for what it did not report."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def resolve_executable(self, path_env: str | None = None) -> str | None:
        wanted = self.options.get("executable", self.executable)
        return shutil.which(wanted, path=path_env if path_env is not None else
                            os.environ.get("PATH"))

    def environment(self, invocation: AgentInvocation | None, private_home: Path) -> dict[str, str]:
        """What the CLI sees: the lifecycle's clean environment, its credentials, a private HOME."""
        if invocation is not None:
            env = dict(invocation.environment)
        else:  # `aka check-agents`: the same variables a run keeps
            from aka_core.lifecycle import AGENT_ENV_KEEP

            env = {k: v for k, v in os.environ.items() if k in AGENT_ENV_KEEP}
        for key in (*self.credential_env, *self.options.get("pass_env", [])):
            if key in os.environ:
                env[key] = os.environ[key]
        env["HOME"] = str(private_home)
        env["XDG_CONFIG_HOME"] = str(private_home / ".config")
        env["XDG_CACHE_HOME"] = str(private_home / ".cache")
        if self.config_dir_env:
            configured = self.options.get("config_dir")
            folder = (Path(configured).expanduser().resolve() if configured
                      else private_home / f".{self.name}")
            folder.mkdir(parents=True, exist_ok=True)  # some CLIs refuse a missing config folder
            env[self.config_dir_env] = str(folder)
        return env

    def auth_status_ok(self, returncode: int, stdout: str, stderr: str) -> bool | None:
        """Whether the CLI's status command says it is logged in (override for odd CLIs)."""
        return returncode == 0

    def version(self, executable: str, env: Mapping[str, str] | None = None,
                wrapper: Sequence[str] = ()) -> str | None:
        try:
            out = subprocess.run([*wrapper, executable, *self.version_args], capture_output=True,
                                 text=True, timeout=VERSION_TIMEOUT, check=False,
                                 stdin=subprocess.DEVNULL, env=dict(env) if env else None)
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = (out.stdout or out.stderr).strip()
        return text.splitlines()[0][:200] if text else None

    def classify(self, run: CliRun) -> str | None:
        """A status read from the CLI's own events (e.g. an error result with exit 0), or None
        to use the exit code: override for CLIs that need it."""
        return None

    def is_auth_failure(self, run: CliRun) -> bool:
        text = run.stderr_tail.lower()
        for event in run.events[-20:]:
            text += " " + json.dumps(event).lower()
        return run.exit_code not in (0, None) and any(m in text for m in self.auth_failure_markers)

    def check(self) -> AgentCheck:
        """Installed? Which version? Logged in (by the CLI's own status command), in the same
        environment a run gives it (private HOME, the configured config folder, credentials)?"""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="aka-check-") as home:
            return self._check(self.environment(None, Path(home)))

    def _check(self, env: dict[str, str]) -> AgentCheck:
        exe = self.resolve_executable(env.get("PATH"))
        if exe is None:
            return AgentCheck(agent=self.name, installed=False,
                              detail=f"{self.options.get('executable', self.executable)!r} is not "
                                     "on PATH")
        version = self.version(exe, env)
        if self.auth_status_args is None:
            have_key = [k for k in self.credential_env if env.get(k)]
            return AgentCheck(agent=self.name, installed=True, version=version,
                              authenticated=True if have_key else None,
                              detail=("credentials from " + ", ".join(have_key)) if have_key else
                              "this CLI has no status command; set "
                              + " or ".join(self.credential_env or ("its login",)))
        try:
            out = subprocess.run([exe, *self.auth_status_args], capture_output=True, text=True,
                                 timeout=VERSION_TIMEOUT, check=False, stdin=subprocess.DEVNULL,
                                 env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return AgentCheck(agent=self.name, installed=True, version=version,
                              authenticated=None, detail=f"status command failed: {exc}")
        detail = (out.stdout or out.stderr).strip().splitlines()
        return AgentCheck(agent=self.name, installed=True, version=version,
                          authenticated=self.auth_status_ok(out.returncode, out.stdout, out.stderr),
                          detail=detail[0][:200] if detail else f"exit {out.returncode}")

    def run(self, invocation: AgentInvocation) -> AgentExecution:
        started = time.monotonic()
        private_home = invocation.logs_dir / "agent_home"
        private_home.mkdir(parents=True, exist_ok=True)
        env = self.environment(invocation, private_home)
        exe = self.resolve_executable(env.get("PATH"))
        if exe is None:
            return AgentExecution(agent=self.name, status="not_installed",
                                  message=f"{self.options.get('executable', self.executable)!r} "
                                          "is not on PATH: install the CLI or set "
                                          "agent.options.executable")
        try:
            cmd = self.command(invocation, exe)
        except Exception as exc:
            return AgentExecution(agent=self.name, status="failed",
                                  message=f"cannot build the command: {exc}")
        env.update(cmd.env)
        env["AKA_SELFCHECK_LOG"] = str(private_home / "selfcheck.log")
        wrapper, confinement = self.confinement(invocation, exe, private_home, env)
        if confinement.get("refused"):
            return AgentExecution(agent=self.name, status="failed",
                                  message=confinement["refused"], confinement=confinement)
        # Everything the CLI runs during a task runs confined, its version query too.
        cmd = attrs.evolve(cmd, argv=[*wrapper, *cmd.argv])
        version = self.version(exe, env, wrapper=wrapper)
        run = run_cli(cmd, invocation.workspace, env, invocation.logs_dir,
                      timeout=invocation.timeout_seconds,
                      grace=float(self.options.get("grace_seconds", GRACE_SECONDS)))
        try:
            usage = self.usage(run.events)
        except Exception as exc:  # a format we did not expect must not lose the run
            usage = AgentUsage()
            usage_note = f"; usage unreadable: {type(exc).__name__}: {exc}"
        else:
            usage_note = ""
        classified = None if run.timed_out else self.classify(run)
        if run.timed_out:
            status = "timed_out"
        elif classified is not None:
            status = classified
        elif run.exit_code == 0:
            status = "completed"
        elif self.is_auth_failure(run):
            status = "not_authenticated"
        else:
            status = "failed"
        message = f"exit {run.exit_code}; {len(run.events)} events"
        if run.malformed_lines:
            message += f"; {run.malformed_lines} lines were not JSON (kept in agent.jsonl)"
        if run.timed_out:
            message += f"; stopped at the budget of {invocation.timeout_seconds:.0f} s"
        if status in ("failed", "not_authenticated") and run.stderr_tail:
            message += f"; stderr: {run.stderr_tail[-300:]}"
        if not confinement.get("confined"):
            message += "; the CLI ran unconfined: " + str(confinement.get("reason"))
        return AgentExecution(agent=self.name, status=status, exit_code=run.exit_code,
                              duration_seconds=round(time.monotonic() - started, 3),
                              timed_out=run.timed_out, version=version,
                              message=message + usage_note, usage=usage, confinement=confinement)

    def confinement(self, invocation: AgentInvocation, exe: str, private_home: Path,
                    env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
        """The command prefix that confines what follows it in bubblewrap
        (``aka_core.agent_sandbox``; empty when not confined), and what was done."""
        from aka_core import agent_sandbox

        policy = self.options.get("confinement", "best_effort")
        if policy == "off":
            return [], {"confined": False, "reason": "confinement: off"}
        bwrap = agent_sandbox.bwrap_path()
        if bwrap is None:
            reason = ("bubblewrap (bwrap) is not installed: apt-get install bubblewrap, or set "
                      "agent.options.confinement: off")
            if policy == "required":
                return [], {"confined": False, "refused": f"cannot confine the CLI: {reason}"}
            return [], {"confined": False, "reason": reason}
        programs = [exe]
        interpreter = agent_sandbox.script_interpreter(Path(exe), env.get("PATH"))
        if interpreter is not None:
            programs.append(str(interpreter))
        writable = [self.options["config_dir"]] if self.options.get("config_dir") else []
        lock_dir = Path(env.get("AKA_GPU_LOCK_DIR") or Path(tempfile.gettempdir(),
                                                             "aka-gpu-locks"))
        lock_dir.mkdir(parents=True, exist_ok=True)
        plan = agent_sandbox.plan(
            workspace=invocation.workspace, private_home=private_home,
            protected=invocation.protected,
            readable=[*invocation.readable, *self.options.get("read_paths", ())],
            writable=[*writable, str(lock_dir)], programs=programs,
            search_path=env.get("PATH"))
        env.update(agent_sandbox.environment_for(env, private_home))
        return agent_sandbox.wrap([], plan, bwrap), {"confined": True,
                                                      **agent_sandbox.describe(plan)}


def run_cli(cmd: CliCommand, cwd: Path, env: Mapping[str, str], logs_dir: Path, *,
            timeout: float, grace: float = GRACE_SECONDS) -> CliRun:
    """Run one CLI launch to completion or to its budget; stream its events to agent.jsonl."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    result = CliRun()
    started = time.monotonic()
    stderr_path = logs_dir / "agent.stderr.log"
    with open(logs_dir / "agent.jsonl", "a", encoding="utf-8") as events_out, \
            open(stderr_path, "ab") as stderr_out:
        proc = subprocess.Popen(
            list(cmd.argv), cwd=cwd, env=dict(env), start_new_session=True,
            stdin=subprocess.PIPE if cmd.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=stderr_out,
        )
        reader = threading.Thread(target=_pump_events, args=(proc, events_out, result),
                                  daemon=True)
        reader.start()
        if cmd.stdin is not None and proc.stdin is not None:
            try:
                proc.stdin.write(cmd.stdin.encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            result.exit_code = proc.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            result.timed_out = True
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
            result.exit_code = proc.returncode
        _signal_group(proc.pid, signal.SIGKILL)  # children the CLI left behind
        reader.join(timeout=5)
    result.duration_seconds = round(time.monotonic() - started, 3)
    try:
        result.stderr_tail = stderr_path.read_bytes()[-2000:].decode("utf-8", errors="replace")
    except OSError:
        pass
    return result


def _pump_events(proc: subprocess.Popen[bytes], out: Any, result: CliRun) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            continue
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError("not an object")
        except ValueError:
            result.malformed_lines += 1
            out.write(json.dumps({"aka_unparsed_line": line[:10_000]}) + "\n")
        else:
            out.write(line + "\n")
            result.events.append(event)
            if len(result.events) > MAX_EVENTS_KEPT:
                # Keep the first events (session/model info) and the latest (final results).
                del result.events[KEEP_FIRST_EVENTS: KEEP_FIRST_EVENTS + MAX_EVENTS_KEPT // 2]
                result.dropped_events += MAX_EVENTS_KEPT // 2
        out.flush()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def as_int(value: Any) -> int | None:
    """An integer the CLI reported, or None (never 0 for a missing value)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    return None
