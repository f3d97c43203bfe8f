"""The shared runtime of CLI agents: launch a CLI headless in the workspace and account for it.

A CLI agent plugin subclasses ``CliAgent`` and says only what differs between CLIs: the command
line, which credentials it reads, where it keeps its configuration, how to ask its version and
login status, which of its events is its final result, how it reports errors, and how to read usage
from its own events. The runtime does the rest the same way for every CLI:

- runs the CLI in the task workspace, in a process group of its own, with a clean environment
  (only what it needs, its credentials passed through, a private HOME/config folder), confined in
  bubblewrap where it can be (``aka_core.kits.agent_sandbox``);
- streams its stdout, one JSON event a line, to ``logs/agent.jsonl`` as it arrives (a line that is
  not JSON is kept, wrapped, and counted); stderr goes to ``logs/agent.stderr.log``;
- stops it at the time budget, and a few seconds after its final result event when it lingers:
  SIGTERM to the whole group, a grace period, then SIGKILL; after a normal exit, whatever the CLI
  left running is killed too. "Whatever it started" includes processes that left its process group
  (a new session): they are found below it in ``/proc`` while it runs;
- stops it the same way when aka itself is stopped (Ctrl-C, SIGTERM: ``aka_core.interrupt``) and
  lets the interruption go on;
- records ``AgentExecution``: a status read from the CLI's own signals (its exit code, its error
  events, its stderr; never from what the model wrote), the CLI's reason in the message, exit
  code, duration, version; and usage taken only from what the CLI itself reported: a value it did
  not report is None, never a guess.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast, get_args

import attrs
import structlog

from aka_core.convert import structure
from aka_core.gpus import gpu_lock_dir
from aka_core.interrupt import signals_deferred
from aka_core.models import AgentExecution, AgentStatus, AgentUsage
from aka_core.plugin.records import AgentInvocation

log = structlog.get_logger("aka.agent")

GRACE_SECONDS = 10.0
VERSION_TIMEOUT = 20.0
MAX_EVENTS_KEPT = 20_000
KEEP_FIRST_EVENTS = 50
MAX_UNPARSED_KEPT = 20
RESULT_EXIT_SECONDS = 2.0
"""How long a CLI may keep running after its final result event before it is stopped (it may be
flushing its session files); with ``RESULT_GRACE_SECONDS`` it is gone within 5 s of the event."""
RESULT_GRACE_SECONDS = 1.5
"""SIGTERM to SIGKILL when a CLI is stopped after its final result (its work is done)."""
INTERRUPT_GRACE_SECONDS = 2.0
"""SIGTERM to SIGKILL when aka itself is stopped: short, because a parallel run's parent kills a
worker that has not exited 5 s after its SIGTERM (``aka_core.builtin.parallel.STOP_GRACE_SECONDS``)."""
POLL_SECONDS = 0.1
TREE_SCAN_SECONDS = 1.0
"""How often the processes below a running CLI are looked up in /proc."""
FAILURE_STATUSES = ("failed", "not_authenticated", "rate_limited", "infra_error")
"""Statuses whose message quotes the CLI's stderr."""

RATE_LIMIT_PATTERNS: tuple[str, ...] = (
    r"\b429\b", r"too many requests", r"rate[ _-]?limit", r"usage limit", r"usage_limit",
    r"resource[ _]exhausted",
)
"""What the CLIs and their providers print when requests are throttled or a usage limit is hit
(HTTP 429; Anthropic's ``rate_limit_error``, OpenAI's ``rate_limit_exceeded``, Cursor's
``resource_exhausted``, "You've hit your usage limit"). Matched in error events and stderr only."""
INFRA_PATTERNS: tuple[str, ...] = (
    r"\b(?:500|502|503|504|529)\b", r"internal server error", r"bad gateway",
    r"service unavailable", r"gateway time-?out", r"overloaded", r"stream disconnected",
    r"error sending request", r"connection (?:reset|refused|closed|error|failed|failure)",
    r"network error", r"econnreset", r"econnrefused", r"etimedout", r"enotfound",
    r"\[(?:unavailable|internal|deadline_exceeded)\]",
    r"insufficient[ _](?:quota|balance|credits?)", r"quota exceeded", r"credit balance",
)
"""The provider's or the network's failures (server errors, overload, lost connections, gRPC /
Connect ``[unavailable]``-style codes as Cursor prints them, an exhausted account): not the
agent's doing. Matched in error events and stderr only."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]+[0-~]|\x1b[0-?@-_]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves, hyperlinks) that CLIs
    print even when stdout is not a terminal."""
    return _ANSI.sub("", text)


def _stripped(value: Any) -> Any:
    return strip_ansi(value) if isinstance(value, str) else value


@attrs.frozen(kw_only=True)
class CliCommand:
    """One launch of a CLI: its argv, what to write on stdin, extra environment."""

    argv: Sequence[str]
    stdin: str | None = None
    env: Mapping[str, str] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class AgentCheck:
    """What ``aka check-agents`` reports for one agent (terminal escapes removed from what the CLI
    printed)."""

    agent: str
    installed: bool
    version: str | None = attrs.field(default=None, converter=_stripped)
    authenticated: bool | None = None
    detail: str = attrs.field(default="", converter=_stripped)

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
    unparsed_lines: list[str] = attrs.Factory(list)
    """The latest lines that were not JSON (some CLIs print errors as plain text on stdout)."""
    exit_code: int | None = None
    timed_out: bool = False
    final_event_at: float | None = None
    """When (``time.monotonic``) the CLI printed its final result event, if it did."""
    stopped_after_result: bool = False
    """The CLI had not exited a few seconds after its final result event and was stopped."""
    duration_seconds: float = 0.0
    stderr_tail: str = ""
    over_limit: str | None = None
    """Why a watch stopped the CLI (its disk or memory use, its processes), if one did."""
    watched: dict[str, Any] = attrs.Factory(dict)
    """The watches' summaries (``disk``, ``memory``): the limits and the CLI's peaks."""

    @property
    def final_event_seen(self) -> bool:
        return self.final_event_at is not None


def common_agent_options_schema(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options every CLI agent takes, plus its own (``extra``)."""
    props: dict[str, Any] = {
        "executable": {"type": "string", "minLength": 1,
                       "description": "The CLI to run (a name on PATH or a path)."},
        "model": {"type": "string", "minLength": 1, "description": "Model name passed to the CLI."},
        "extra_args": {"type": "array", "items": {"type": "string"}, "default": [],
                       "description": "Arguments appended to the CLI's command line."},
        "grace_seconds": {"type": "number", "minimum": 0, "default": GRACE_SECONDS,
                          "description": "Seconds between SIGTERM and SIGKILL at the time budget."},
        "config_dir": {"type": "string", "minLength": 1,
                       "description": "Use this folder as the CLI's configuration folder (for a "
                                      "login stored on disk) instead of a fresh private one."},
        "pass_env": {"type": "array", "items": {"type": "string"}, "default": [],
                     "description": "More environment variables to pass through to the CLI."},
        "confinement": {"enum": ["required", "best_effort", "off"], "default": "best_effort",
                        "description": "Confine the CLI and what it runs in bubblewrap "
                                       "(aka_core.kits.agent_sandbox): required fails the agent step "
                                       "where bwrap is missing; best_effort (default) runs it "
                                       "unconfined there and says so; off never confines."},
        "read_paths": {"type": "array", "items": {"type": "string", "minLength": 1},
                       "default": [],
                       "description": "More folders a confined CLI may read where they would be "
                                      "hidden (a toolchain in the home folder)."},
    }
    props.update(extra or {})
    return {"type": "object", "additionalProperties": False, "properties": props}


@attrs.frozen(kw_only=True)
class CliAgentOptions:
    """The options every CLI agent takes, typed (``common_agent_options_schema`` is their schema,
    with the same defaults); a CLI agent's own options subclass it."""

    executable: str | None = None
    model: str | None = None
    extra_args: tuple[str, ...] = ()
    grace_seconds: float = GRACE_SECONDS
    config_dir: str | None = None
    pass_env: tuple[str, ...] = ()
    confinement: str = "best_effort"
    read_paths: tuple[str, ...] = ()


class CliAgent:
    """Base of CLI agents. Subclasses set the class attributes and implement ``command`` and
    ``usage``, and (to stop a lingering CLI and to tell why a run ended) ``is_final_event``,
    ``error_texts`` and ``classify``; ``run`` and ``check`` are shared."""

    name: ClassVar[str] = "cli"
    executable: ClassVar[str] = ""
    credential_env: ClassVar[tuple[str, ...]] = ()
    """Environment variables holding credentials, passed through when set."""
    api_key_env: ClassVar[tuple[str, ...] | None] = None
    """The credential variables the CLI itself logs in with (default: ``credential_env``): one
    that is set counts as authenticated in ``aka check-agents`` unless the CLI's status command
    says the key is refused."""
    config_dir_env: ClassVar[str | None] = None
    """The variable that points the CLI at its configuration folder, where it has one."""
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    auth_status_args: ClassVar[tuple[str, ...] | None] = None
    auth_failure_markers: ClassVar[tuple[str, ...]] = (
        "not logged in", "please log in", "unauthorized", "invalid api key",
        "authentication failed", "authentication_error", "status 401", "401 unauthorized",
    )
    """Words in the CLI's error events or stderr saying its credentials were refused or missing."""
    key_refused_markers: ClassVar[tuple[str, ...]] = (
        "invalid api key", "incorrect api key", "api key is invalid", "invalid x-api-key",
        "key has been revoked", "key has expired", "key is expired",
    )
    """Words in the status command's output saying the API key itself was refused (not merely
    that nobody logged in, which status commands say when only a key is set)."""
    rate_limit_patterns: ClassVar[tuple[str, ...]] = RATE_LIMIT_PATTERNS
    infra_patterns: ClassVar[tuple[str, ...]] = INFRA_PATTERNS

    options_class: ClassVar[type[CliAgentOptions]] = CliAgentOptions
    """The agent's options (its record's ``options_class``)."""

    def __init__(self, options: CliAgentOptions | Mapping[str, Any] | None = None):
        # a mapping (a direct caller's, a test's) is typed through the one converter, as a run's is
        self.options: Any = (options if isinstance(options, CliAgentOptions)
                             else structure(dict(options or {}), self.options_class))

    # ------------------------------------------------------------------ to implement
    def command(self, invocation: AgentInvocation, executable: str) -> CliCommand:
        raise NotImplementedError

    def usage(self, events: list[dict[str, Any]]) -> AgentUsage:
        """Usage as the CLI reported it in ``events``; None for what it did not report."""
        raise NotImplementedError

    def is_final_event(self, event: Mapping[str, Any]) -> bool:
        """Whether ``event`` is the CLI's final result: after it, the CLI has nothing left to do
        and is stopped if it has not exited within ``RESULT_EXIT_SECONDS``. Default: no event is
        (the CLI runs until it exits or reaches its budget)."""
        return False

    def error_texts(self, run: CliRun) -> list[str]:
        """What the CLI reported as errors in its events (error events, a failed result), oldest
        first: never the model's own text. Default: none."""
        return []

    def classify(self, run: CliRun) -> str | None:
        """The status of a run that did not time out, from the CLI's own signals, or None for
        ``completed``/``failed`` by the exit code. Default: a run that exited 0 (or was stopped
        after its final event) completed; otherwise its error events and stderr tell whether it
        was refused (``not_authenticated``), throttled (``rate_limited``) or failed for reasons
        outside the agent (``infra_error``). Override to read a CLI's result event."""
        if self.succeeded(run):
            return None
        return self.status_from_errors([*self.error_texts(run), *run.unparsed_lines,
                                        run.stderr_tail])

    def failure_reason(self, run: CliRun) -> str | None:
        """The CLI's own words for why the run did not complete (put in the message). Default:
        its last error event."""
        texts = [t for t in self.error_texts(run) if t.strip()]
        return texts[-1] if texts else None

    def version_warning(self, version: str | None) -> str | None:
        """Why the installed CLI may not understand the command line (put in the message and
        logged), or None. Default: never."""
        return None

    def launch_environment(self, env: dict[str, str], *, confined: bool) -> None:
        """Last changes to the CLI's environment, once it is known whether it runs confined
        (e.g. a switch a CLI needs to run as root inside a sandbox). Default: none."""

    # ------------------------------------------------------------------ helpers for plugins
    def succeeded(self, run: CliRun) -> bool:
        """Exit 0, or stopped after printing its final result (its exit code then means nothing)."""
        return run.exit_code == 0 or run.stopped_after_result

    def status_from_errors(self, texts: Iterable[str]) -> str | None:
        """``not_authenticated``, ``rate_limited`` or ``infra_error`` when ``texts`` (the CLI's
        error reports and stderr, never the model's text) say so; None otherwise."""
        text = "\n".join(strip_ansi(t) for t in texts if t).lower()
        if not text.strip():
            return None
        if any(marker in text for marker in self.auth_failure_markers):
            return "not_authenticated"
        if any(re.search(pattern, text) for pattern in self.rate_limit_patterns):
            return "rate_limited"
        if any(re.search(pattern, text) for pattern in self.infra_patterns):
            return "infra_error"
        return None

    # ------------------------------------------------------------------ shared
    def resolve_executable(self, path_env: str | None = None) -> str | None:
        wanted = self.options.executable or self.executable
        return shutil.which(wanted, path=path_env if path_env is not None else
                            os.environ.get("PATH"))

    def environment(self, invocation: AgentInvocation | None, private_home: Path) -> dict[str, str]:
        """What the CLI sees: the lifecycle's clean environment, its credentials, a private HOME."""
        if invocation is not None:
            env = dict(invocation.environment)
        else:  # `aka check-agents`: the same variables a run keeps
            from aka_core.run.lifecycle import AGENT_ENV_KEEP

            env = {k: v for k, v in os.environ.items() if k in AGENT_ENV_KEEP}
        for key in (*self.credential_env, *self.options.pass_env):
            if key in os.environ:
                env[key] = os.environ[key]
        env["HOME"] = str(private_home)
        env["XDG_CONFIG_HOME"] = str(private_home / ".config")
        env["XDG_CACHE_HOME"] = str(private_home / ".cache")
        if self.config_dir_env:
            configured = self.options.config_dir
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
        text = strip_ansi(out.stdout or out.stderr).strip()
        return text.splitlines()[0][:200] if text else None

    def check(self) -> AgentCheck:
        """Installed? Which version? Logged in, in the same environment a run gives it (private
        HOME, the configured config folder, credentials)?

        One rule for every CLI: the CLI's status command decides when it says "logged in", or
        when it says the API key itself is refused; otherwise an API key the CLI reads
        (``api_key_env``) that is set counts as logged in (status commands look only at a stored
        login); otherwise the status command's "not logged in" stands; without a status command
        and without a key, the login is unknown (still ready)."""
        with tempfile.TemporaryDirectory(prefix="aka-check-") as home:
            return self._check(self.environment(None, Path(home)))

    def _check(self, env: dict[str, str]) -> AgentCheck:
        exe = self.resolve_executable(env.get("PATH"))
        if exe is None:
            return AgentCheck(agent=self.name, installed=False,
                              detail=f"{self.options.executable or self.executable!r} is not "
                                     "on PATH")
        version = self.version(exe, env)
        keys = [k for k in (self.credential_env if self.api_key_env is None else self.api_key_env)
                if env.get(k)]
        key_note = (f"{', '.join(keys)} {'is' if len(keys) == 1 else 'are'} set (the CLI logs "
                    "in with it)") if keys else ""
        if self.auth_status_args is None:
            return AgentCheck(agent=self.name, installed=True, version=version,
                              authenticated=True if keys else None,
                              detail=key_note or "this CLI has no status command; set "
                              + " or ".join(self.credential_env or ("its login",)))
        try:
            out = subprocess.run([exe, *self.auth_status_args], capture_output=True, text=True,
                                 timeout=VERSION_TIMEOUT, check=False, stdin=subprocess.DEVNULL,
                                 env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return AgentCheck(agent=self.name, installed=True, version=version,
                              authenticated=True if keys else None,
                              detail=(key_note + "; " if key_note else "")
                              + f"status command failed: {exc}")
        lines = strip_ansi(out.stdout or out.stderr).strip().splitlines()
        said = lines[0][:200] if lines else f"exit {out.returncode}"
        logged_in = self.auth_status_ok(out.returncode, out.stdout, out.stderr)
        status_text = strip_ansi(f"{out.stdout}\n{out.stderr}").lower()
        if logged_in is not True and keys:
            if any(m in status_text for m in self.key_refused_markers):
                return AgentCheck(agent=self.name, installed=True, version=version,
                                  authenticated=False,
                                  detail=f"{key_note}, but `{' '.join(self.auth_status_args)}` "
                                         f"says the key is refused: {said}")
            return AgentCheck(agent=self.name, installed=True, version=version,
                              authenticated=True,
                              detail=f"{key_note}; `{' '.join(self.auth_status_args)}`, which "
                                     f"looks at a stored login only, said: {said}")
        return AgentCheck(agent=self.name, installed=True, version=version,
                          authenticated=logged_in, detail=said)

    def run(self, invocation: AgentInvocation) -> AgentExecution:
        started = time.monotonic()
        private_home = invocation.logs_dir / "agent_home"
        private_home.mkdir(parents=True, exist_ok=True)
        env = self.environment(invocation, private_home)
        exe = self.resolve_executable(env.get("PATH"))
        if exe is None:
            return AgentExecution(agent=self.name, status="not_installed",
                                  message=f"{self.options.executable or self.executable!r} "
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
        self.launch_environment(env, confined=bool(confinement.get("confined")))
        # Everything the CLI runs during a task runs confined, its version query too.
        cmd = attrs.evolve(cmd, argv=[*wrapper, *cmd.argv])
        version = self.version(exe, env, wrapper=wrapper)
        warning = self.version_warning(version)
        if warning:
            log.warning("agent CLI version", agent=self.name, version=version, warning=warning)
        run = run_cli(cmd, invocation.workspace, env, invocation.logs_dir,
                      timeout=invocation.timeout_seconds,
                      grace=float(self.options.grace_seconds),
                      is_final=self.is_final_event, sandboxed=bool(wrapper),
                      watched=[private_home])
        try:
            usage = self.usage(run.events)
        except Exception as exc:  # a format we did not expect must not lose the run
            usage = AgentUsage()
            usage_note = f"; usage unreadable: {type(exc).__name__}: {exc}"
        else:
            usage_note = ""
        status = self.status_of(run)
        message = f"exit {run.exit_code}; {len(run.events)} events"
        if run.malformed_lines:
            message += f"; {run.malformed_lines} lines were not JSON (kept in agent.jsonl)"
        if run.timed_out:
            message += f"; stopped at the budget of {invocation.timeout_seconds:.0f} s"
        if run.stopped_after_result:
            message += (f"; stopped after its final result event (it had not exited within "
                        f"{RESULT_EXIT_SECONDS:g} s)")
        if run.over_limit is not None:
            message += f"; stopped: {run.over_limit}"
        if status != "completed":
            try:
                reason = self.failure_reason(run)
            except Exception as exc:  # never lose the run over a message
                reason = f"(unreadable: {type(exc).__name__}: {exc})"
            if reason:
                message += f"; {self.executable or self.name} said: {strip_ansi(reason)[:500]}"
        if status in FAILURE_STATUSES and run.stderr_tail.strip():
            message += f"; stderr: {strip_ansi(run.stderr_tail)[-300:]}"
        if warning:
            message += f"; warning: {warning}"
        if not confinement.get("confined"):
            message += "; the CLI ran unconfined: " + str(confinement.get("reason"))
        return AgentExecution(agent=self.name, status=status, exit_code=run.exit_code,
                              duration_seconds=round(time.monotonic() - started, 3),
                              timed_out=run.timed_out, version=version,
                              message=message + usage_note, usage=usage, confinement=confinement)

    def status_of(self, run: CliRun) -> AgentStatus:
        """``failed`` where a watch stopped it, ``timed_out``, what ``classify`` says, else
        ``completed``/``failed`` by the exit."""
        if run.over_limit is not None:
            return "failed"
        if run.timed_out:
            return "timed_out"
        try:
            classified = self.classify(run)
        except Exception as exc:  # a format we did not expect must not lose the run
            log.warning("cannot classify the agent's run", agent=self.name,
                        error=f"{type(exc).__name__}: {exc}")
            classified = None
        if classified is not None:
            if classified not in get_args(AgentStatus):
                raise ValueError(f"{type(self).__name__}.classify returned {classified!r}, not "
                                 f"one of {get_args(AgentStatus)}")
            return cast(AgentStatus, classified)
        return "completed" if self.succeeded(run) else "failed"

    def confinement(self, invocation: AgentInvocation, exe: str, private_home: Path,
                    env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
        """The command prefix that confines what follows it in bubblewrap
        (``aka_core.kits.agent_sandbox``; empty when not confined), and what was done."""
        from aka_core.kits import agent_sandbox

        policy = self.options.confinement
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
        writable = [self.options.config_dir] if self.options.config_dir else []
        lock_dir = gpu_lock_dir(env)
        plan = agent_sandbox.plan(
            workspace=invocation.workspace, private_home=private_home,
            protected=invocation.protected,
            readable=[*invocation.readable, *self.options.read_paths],
            writable=[*writable, str(lock_dir)], programs=programs,
            search_path=env.get("PATH"))
        env.update(agent_sandbox.environment_for(env, private_home))
        return agent_sandbox.wrap([], plan, bwrap), {"confined": True,
                                                      **agent_sandbox.describe(plan, bwrap)}


def run_cli(cmd: CliCommand, cwd: Path, env: Mapping[str, str], logs_dir: Path, *,
            timeout: float, grace: float = GRACE_SECONDS,
            is_final: Callable[[Mapping[str, Any]], bool] | None = None,
            sandboxed: bool = False, watched: Sequence[Path] = ()) -> CliRun:
    """Run one CLI launch to completion, to its budget, or to a few seconds after its final event
    (``is_final``); stream its events to agent.jsonl. When aka is interrupted meanwhile (Ctrl-C,
    SIGTERM), the CLI and everything it started are stopped and the interruption goes on.

    ``sandboxed``: ``cmd`` starts a sandbox (bwrap) around the CLI. SIGTERM then goes to what runs
    inside it, not to the sandbox, which would die at once and take the CLI with it (SIGKILL, by
    ``--die-with-parent``) before the CLI could use its grace period.

    The CLI and everything it starts are held to the judge's limits (``disk_watch`` on ``cwd``
    and ``watched``, ``memory_watch`` on its processes): over one, they are killed and the run
    says why (``over_limit``). An agent is an adversary too: one that filled the disk or the
    host's memory would fail every evaluation on the host, its own included, as the host's
    fault."""
    from aka_core.evaluation import disk_watch, memory_watch

    logs_dir.mkdir(parents=True, exist_ok=True)
    result = CliRun()
    # Made before the CLI starts: a bad AKA_SCRATCH_LIMIT or AKA_MEMORY_LIMIT starts nothing.
    disk = disk_watch.DiskWatch()
    memory = memory_watch.MemoryWatch(shortage=False)
    started = time.monotonic()
    stderr_path = logs_dir / "agent.stderr.log"
    with open(logs_dir / "agent.jsonl", "a", encoding="utf-8") as events_out, \
            open(stderr_path, "ab") as stderr_out:
        stderr_start = stderr_out.tell()  # the file may hold an earlier launch's stderr
        # The CLI's stdout and stderr are sockets, never a pipe or the log file itself: what the
        # CLI prints there is its own word (a provider's failure makes the task an infra_error,
        # its candidate unjudged), and the agent's commands, processes of the same user below
        # the CLI, could open a pipe or a file again through /proc/<the CLI>/fd/1 or fd/2 and
        # write "429 Too Many Requests" there (tests/redteam/test_agent_status.py). No path
        # opens a socket.
        events_in, events_theirs = socket.socketpair()
        errors_in, errors_theirs = socket.socketpair()
        try:
            proc = _launch(cmd, cwd, env, errors_theirs.fileno(), stdout=events_theirs.fileno())
        except BaseException:
            events_in.close()
            errors_in.close()
            raise
        finally:
            events_theirs.close()
            errors_theirs.close()
        for ours in (events_in, errors_in):
            with contextlib.suppress(OSError):
                ours.shutdown(socket.SHUT_WR)  # one way: nothing is sent to the CLI here
        events_stream = events_in.makefile("rb")
        copier = threading.Thread(target=_copy_stream, args=(errors_in, stderr_out), daemon=True)
        copier.start()
        tree = ProcessTree(proc.pid)

        def roots() -> list[int]:  # from a watch's thread: the tree's table may be changing
            with contextlib.suppress(RuntimeError):
                return [proc.pid, *list(tree.known)]
            return [proc.pid]

        def over(message: str) -> None:  # from a watch's thread
            if result.over_limit is None:
                result.over_limit = message
            _signal_group(proc.pid, signal.SIGKILL)
            tree.signal(signal.SIGKILL)

        disk.watch("agent", [cwd, *watched], roots=roots, over=over)
        memory.watch("agent", roots=roots, over=over)
        reader = threading.Thread(target=_pump_events,
                                  args=(events_stream, events_out, result, is_final), daemon=True)
        reader.start()
        if cmd.stdin is not None:
            # In a thread: a CLI that does not read its stdin must not block the budget.
            threading.Thread(target=_feed_stdin, args=(proc, cmd.stdin), daemon=True).start()
        try:
            result.exit_code = _supervise(proc, tree, result, started + max(timeout, 0.0), grace,
                                          sandboxed)
        except BaseException:
            # aka itself is stopping (Ctrl-C, SIGTERM, an error): the CLI, which has a session of
            # its own, would not get the signal and would keep running with its children.
            with signals_deferred():
                log.warning("stopping the agent CLI: aka is stopping", pid=proc.pid)
                result.exit_code = _stop(proc, tree, INTERRUPT_GRACE_SECONDS, sandboxed)
            raise
        finally:
            with signals_deferred():
                # What the CLI left running: its group, and what left the group (new sessions).
                tree.update()
                _signal_group(proc.pid, signal.SIGKILL)
                tree.signal(signal.SIGKILL)
                reader.join(timeout=5)
                copier.join(timeout=5)
                for stream in (events_stream, events_in, errors_in):
                    with contextlib.suppress(OSError):
                        stream.close()
                result.watched = {"disk": disk.stop(), "memory": memory.stop()}
    result.duration_seconds = round(time.monotonic() - started, 3)
    try:
        with open(stderr_path, "rb") as handle:
            handle.seek(max(stderr_start, handle.seek(0, os.SEEK_END) - 2000))
            result.stderr_tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        pass
    return result


def _copy_stream(source: socket.socket, out: Any) -> None:
    """What the CLI writes to its stderr (``source``), into its log ``out``, until it closes."""
    with contextlib.suppress(OSError, ValueError):
        while chunk := source.recv(1 << 16):
            out.write(chunk)
            out.flush()


def _launch(cmd: CliCommand, cwd: Path, env: Mapping[str, str],
            stderr_out: Any, *, stdout: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    from aka_core.evaluation.evaluate import die_with_parent  # one implementation of the guard
    from aka_core.evaluation.sandbox import OOM_SCORE_ADJ

    try:
        return subprocess.Popen(
            list(cmd.argv), cwd=cwd, env=dict(env), start_new_session=True,
            stdin=subprocess.PIPE if cmd.stdin is not None else subprocess.DEVNULL,
            stdout=stdout, stderr=stderr_out,
            # Should aka be SIGKILLed (no cleanup runs), the CLI goes with it; a confined CLI's
            # whole sandbox does anyway (bwrap --die-with-parent). The OOM killer takes the
            # agent's processes before aka's (which hold what the run has recorded).
            preexec_fn=die_with_parent(os.getpid(), OOM_SCORE_ADJ["agent"]),
        )
    except OSError as exc:
        if exc.errno == errno.E2BIG:
            raise OSError(exc.errno, "the command line is too long for the operating system "
                          f"({sum(len(a) + 1 for a in cmd.argv)} bytes; one argument may hold "
                          "at most 128 KiB): pass long input on stdin") from exc
        raise


def _feed_stdin(proc: subprocess.Popen[bytes], text: str) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):
        proc.stdin.write(text.encode())
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):
        proc.stdin.close()


def _supervise(proc: subprocess.Popen[bytes], tree: ProcessTree, result: CliRun,
               deadline: float, grace: float, sandboxed: bool) -> int:
    """Wait for the CLI; stop it at ``deadline`` or ``RESULT_EXIT_SECONDS`` after its final event.
    Meanwhile remember the processes below it, so that those that leave its group can be found
    once it has exited (they are orphaned then, and /proc no longer links them to it)."""
    next_scan = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= next_scan:
            tree.update()
            next_scan = now + TREE_SCAN_SECONDS
        try:
            return proc.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        final_at = result.final_event_at
        # A CLI still running after its final event has done its work, even at the budget.
        if final_at is not None and (now >= final_at + RESULT_EXIT_SECONDS or now >= deadline):
            result.stopped_after_result = True
            log.info("stopping the agent CLI: it printed its final result and did not exit",
                     pid=proc.pid, seconds=round(now - final_at, 1))
            return _stop(proc, tree, min(grace, RESULT_GRACE_SECONDS), sandboxed)
        if now >= deadline:
            result.timed_out = True
            return _stop(proc, tree, grace, sandboxed)


def _stop(proc: subprocess.Popen[bytes], tree: ProcessTree, grace: float,
          sandboxed: bool = False) -> int:
    """SIGTERM to the CLI's group and to what left it (in a sandbox: to what runs inside it),
    ``grace`` seconds, then SIGKILL to all."""
    tree.update()
    if not sandboxed:
        _signal_group(proc.pid, signal.SIGTERM)
    tree.signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        tree.update()
        _signal_group(proc.pid, signal.SIGKILL)
        tree.signal(signal.SIGKILL)
        return proc.wait()


@attrs.define
class ProcessTree:
    """The processes below a CLI, found in /proc by their parent and remembered with their start
    times: those that left the CLI's process group (a new session) are still found after their
    parent exited, and a pid that now belongs to another process is never signalled."""

    root: int
    known: dict[int, int] = attrs.Factory(dict)
    """pid -> start time (clock ticks since boot) of every process seen below ``root``."""

    def update(self) -> None:
        table = _process_table()
        if not table:
            return
        self.known = {pid: start for pid, start in self.known.items()
                      if table.get(pid, (0, -1))[1] == start}
        children: dict[int, list[int]] = {}
        for pid, (parent, _start) in table.items():
            children.setdefault(parent, []).append(pid)
        frontier = [self.root, *self.known]
        while frontier:
            for child in children.get(frontier.pop(), []):
                if child not in self.known and child != self.root:
                    self.known[child] = table[child][1]
                    frontier.append(child)

    def signal(self, sig: int) -> None:
        for pid, start in list(self.known.items()):
            if _start_time(pid) != start:
                self.known.pop(pid, None)
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def alive(self) -> list[int]:
        return [pid for pid, start in self.known.items() if _start_time(pid) == start]


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every live process, from /proc (empty without it)."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for name in entries:
        if not name.isdigit():
            continue
        stat = _stat(int(name))
        if stat is not None:
            table[int(name)] = stat
    return table


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        if fields[0] in (b"Z", b"X"):
            return None
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _start_time(pid: int) -> int | None:
    stat = _stat(pid)
    return None if stat is None else stat[1]


def _pump_events(stream: Any, out: Any, result: CliRun,
                 is_final: Callable[[Mapping[str, Any]], bool] | None = None) -> None:
    """The CLI's events, a line each, from its stdout (``stream``) into ``out`` and ``result``."""
    with contextlib.suppress(OSError, ValueError):  # closed once the CLI is done
        _pump_lines(stream, out, result, is_final)


def _pump_lines(stream: Any, out: Any, result: CliRun,
                is_final: Callable[[Mapping[str, Any]], bool] | None) -> None:
    for raw in stream:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            continue
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError("not an object")
        except ValueError:
            result.malformed_lines += 1
            result.unparsed_lines.append(line[:2000])
            del result.unparsed_lines[:-MAX_UNPARSED_KEPT]
            out.write(json.dumps({"aka_unparsed_line": line[:10_000]}) + "\n")
        else:
            out.write(line + "\n")
            result.events.append(event)
            if len(result.events) > MAX_EVENTS_KEPT:
                # Keep the first events (session/model info) and the latest (final results).
                del result.events[KEEP_FIRST_EVENTS: KEEP_FIRST_EVENTS + MAX_EVENTS_KEPT // 2]
                result.dropped_events += MAX_EVENTS_KEPT // 2
            if is_final is not None and result.final_event_at is None:
                try:
                    final = is_final(event)
                except Exception:  # an odd event must not stop the stream
                    final = False
                if final:
                    result.final_event_at = time.monotonic()
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
