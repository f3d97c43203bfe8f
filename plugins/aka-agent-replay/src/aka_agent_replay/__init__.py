"""The ``replay`` agent: copies stored files into the workspace instead of generating them.

``<source>/<task id>/`` (for example ``solutions/triton2triton/gelu/``) holds the files to place
in the task's workspace: an external RL policy's output, or a known solution. Only regular files
are copied; a destination that would leave the workspace (through a symlink or ``..``) fails the
whole replay before anything is written. Failures are reported in ``AgentExecution``, never raised.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import attrs

from aka_core.plugin import AgentExecution, AgentInvocation, AgentSpec, AgentStatus, ConfigError, hookimpl

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["source"],
    "properties": {
        "source": {
            "type": "string",
            "minLength": 1,
            "description": "Folder holding one <task id>/ folder per task; relative paths are "
            "relative to the current directory.",
        },
        "missing": {
            "enum": ["fail", "keep"],
            "default": "fail",
            "description": "When a task has no folder: fail the agent step, or keep the "
            "workspace unchanged (the baseline is evaluated).",
        },
    },
}


class UnsafeCopy(Exception):
    """A source file would land outside the workspace."""


@attrs.frozen(kw_only=True)
class CopyPlan:
    files: tuple[tuple[Path, Path, str], ...]
    """(source file, destination, path relative to the workspace) for every regular file."""
    skipped: tuple[str, ...]
    """Entries that are not regular files (symlinks, devices, ...): never copied."""


def plan_copies(folder: Path, workspace: Path) -> CopyPlan:
    """List what to copy from ``folder`` into ``workspace``; raise ``UnsafeCopy`` on an escape."""
    root = workspace.resolve()
    files: list[tuple[Path, Path, str]] = []
    skipped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):  # does not descend into symlinked dirs
        base = Path(dirpath)
        dirnames.sort()
        for name in [*dirnames, *sorted(filenames)]:
            source = base / name
            rel = source.relative_to(folder).as_posix()
            mode = source.lstat().st_mode
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                skipped.append(rel)
                continue
            destination = (workspace / rel).parent.resolve() / name
            if not destination.is_relative_to(root):
                raise UnsafeCopy(f"refusing {rel}: it would be written outside the workspace "
                                 f"(to {destination})")
            if destination.is_dir() and not destination.is_symlink():
                raise UnsafeCopy(f"refusing {rel}: it is a folder in the workspace")
            files.append((source, destination, rel))
    return CopyPlan(files=tuple(files), skipped=tuple(skipped))


def copy_planned(plan: CopyPlan) -> None:
    """Copy each file next to its destination, then rename it over (never follows a symlink)."""
    for source, destination, _rel in plan.files:
        destination.parent.mkdir(parents=True, exist_ok=True)
        partial = destination.with_name(f".{destination.name}.replay-partial")
        shutil.copyfile(source, partial, follow_symlinks=False)
        os.replace(partial, destination)


@attrs.frozen(kw_only=True)
class ReplayAgent:
    """Copies ``<source>/<task id>/`` into the workspace."""

    source: Path
    missing: Literal["fail", "keep"] = attrs.field(
        default="fail", validator=attrs.validators.in_(("fail", "keep"))
    )

    def run(self, invocation: AgentInvocation) -> AgentExecution:
        started = time.monotonic()
        status, message = self._replay(invocation.task.id, invocation.workspace)
        return AgentExecution(
            agent="replay",
            status=status,
            exit_code=0 if status == "completed" else 1,
            duration_seconds=time.monotonic() - started,
            message=message,
        )

    def _replay(self, task_id: str, workspace: Path) -> tuple[AgentStatus, str]:
        parts = PurePosixPath(task_id).parts
        if (not parts or PurePosixPath(task_id).is_absolute() or "\\" in task_id
                or any(part in (".", "..") for part in parts)):
            return "failed", f"refusing task id {task_id!r}: it would leave {self.source}"
        folder = self.source.joinpath(*parts)
        if not folder.is_dir():
            if self.missing == "keep":
                return "completed", (f"no solution for {task_id} at {folder}; "
                                     "workspace left unchanged (missing: keep)")
            return "failed", (f"no solution folder for task {task_id} at {folder} "
                              "(add it, or set the replay option missing: keep)")
        try:
            plan = plan_copies(folder, workspace)
            copy_planned(plan)
        except UnsafeCopy as exc:
            return "failed", f"nothing copied from {folder}: {exc}"
        except OSError as exc:
            return "failed", f"copying from {folder} failed: {exc}"
        copied = ", ".join(rel for _s, _d, rel in plan.files) or "nothing"
        message = f"copied {len(plan.files)} file(s) from {folder}: {copied}"
        if plan.skipped:
            message += f"; skipped (not regular files): {', '.join(plan.skipped)}"
        return "completed", message


@attrs.frozen(kw_only=True)
class ReplayOptions:
    """``agent.options``; the default is CONFIG_SCHEMA's."""

    source: str
    missing: Literal["fail", "keep"] = "fail"


def make_agent(options: ReplayOptions) -> ReplayAgent:
    """Build the agent from ``agent.options``; a relative ``source`` is resolved against the cwd.
    A ``source`` that is not a folder is an error of the options (``ConfigError``)."""
    source = Path.cwd() / Path(options.source).expanduser()
    if not source.is_dir():
        raise ConfigError(f"source {options.source!r} is not a folder (looked for {source}; "
                          "a relative source is taken from the current directory)")
    return ReplayAgent(source=source, missing=options.missing)


@hookimpl
def aka_register_agents() -> list[AgentSpec]:
    return [
        AgentSpec(
            name="replay",
            factory=make_agent,
            description="Copies <source>/<task id>/ into the workspace (stored or external output)",
            config_schema=CONFIG_SCHEMA,
            options_class=ReplayOptions,
        )
    ]
