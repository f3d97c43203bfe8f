"""Task workspaces: a private copy for the agent, a preserved baseline, and integrity checks.

Before the agent starts, every file of the task is hashed. Afterwards only the task's declared
editable files may differ: a protected file that was changed or removed is restored from the task
and recorded (the candidate is then rejected); files the agent added are listed and left alone.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
from pathlib import Path

from aka_core.models import TASK_FILE, IntegrityReport, Task

IGNORED_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}


def _files(root: Path) -> list[str]:
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if any(part in IGNORED_PARTS for part in rel.parts):
            continue
        if path.is_file() or path.is_symlink():
            out.append(rel.as_posix())
    return sorted(out)


def digest(path: Path) -> str:
    if path.is_symlink():
        return "symlink:" + os.readlink(path)
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digests(root: Path) -> dict[str, str]:
    return {rel: digest(root / rel) for rel in _files(root)}


def agent_view_of_task_file(task: Task) -> str:
    """task.yaml as the agent sees it: without the held-out cases it must never see."""
    return _agent_view((task.root / TASK_FILE).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=32)
def _agent_view(text: str) -> str:
    # Keyed by the file's text: the workspace and the evaluator's copy of one evaluation make
    # the same view (a round trip through the comment-keeping YAML parser is not cheap).
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    data = yaml.load(text)
    data.pop("held_out_cases", None)
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def prepare_workspace(task: Task, dest: Path) -> dict[str, str]:
    """The agent's private copy of the task (held-out cases removed); returns its digests."""
    copy_task(task, dest)
    if (dest / TASK_FILE).is_file():
        (dest / TASK_FILE).write_text(agent_view_of_task_file(task), encoding="utf-8")
    return digests(dest)


def preserve_baseline(task: Task, dest: Path) -> dict[str, str]:
    """A fresh read-only copy of the task: what the evaluator loads reference, inputs and
    baseline from. Its task.yaml is the agent's view too (the copy sits next to the workspace;
    the evaluator takes its cases from the loaded task, not from this file). Returns its digests.
    """
    remove_tree(dest)
    copy_task(task, dest)
    if (dest / TASK_FILE).is_file():
        (dest / TASK_FILE).write_text(agent_view_of_task_file(task), encoding="utf-8")
    make_read_only(dest)
    return digests(dest)


def _differences(before: dict[str, str], now: dict[str, str]) -> list[str]:
    return sorted(rel for rel in set(before) | set(now) if before.get(rel) != now.get(rel))


def changed_since(before: dict[str, str], root: Path) -> list[str]:
    """Files of ``root`` added, changed or gone since ``before`` (all of them if ``root`` is)."""
    return _differences(before, digests(root) if root.is_dir() else {})


def check_outside_workspace(task: Task, baseline: Path, task_before: dict[str, str],
                            baseline_before: dict[str, str]) -> list[str]:
    """Task files changed outside the workspace while the agent ran (digests of the task folder
    and of the preserved copy taken before it). Leaves ``baseline`` an intact copy, or raises when
    none is left."""
    from aka_core.errors import AkaError

    in_task = _differences(task_before, digests(task.root))
    in_copy = _differences(baseline_before, digests(baseline))
    if in_copy and not in_task:
        preserve_baseline(task, baseline)
    elif in_copy and in_task:
        raise AkaError("both the task folder and the run's preserved copy of it changed while the "
                       "agent ran; no intact copy of the evaluator's files is left")
    return [f"{task.id}/{rel} (task folder)" for rel in in_task] + [
        f"baseline/{rel} (preserved copy)" for rel in in_copy]


def copy_task(task: Task, dest: Path) -> None:
    """Copy the task folder (without caches) to ``dest``, which must not exist."""
    shutil.copytree(task.root, dest, ignore=shutil.ignore_patterns(*IGNORED_PARTS), symlinks=True)


def make_read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def make_writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def remove_tree(root: Path) -> None:
    if root.exists():
        make_writable(root)
        shutil.rmtree(root)


def check_and_restore(task: Task, workspace: Path, original: dict[str, str]) -> IntegrityReport:
    """Compare the workspace with its state before the agent (``original``, from
    ``prepare_workspace``); restore protected files from the task; list what changed."""
    current = digests(workspace)
    editable = set(task.editable)
    changed, restored = [], []
    for rel, value in original.items():
        now = current.get(rel)
        if now == value:
            continue
        if rel in editable:
            changed.append(rel)
            continue
        restored.append(rel)
        target = workspace / rel
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        _restore(task, rel, target)
    added = sorted(set(current) - set(original))
    escaped = [rel for rel in changed if (workspace / rel).is_symlink()]
    for rel in escaped:  # an editable file replaced by a symlink could point anywhere
        changed.remove(rel)
        restored.append(rel)
        (workspace / rel).unlink()
        _restore(task, rel, workspace / rel)
    return IntegrityReport(ok=not restored, changed_files=tuple(sorted(changed)),
                           restored_files=tuple(sorted(restored)), added_files=tuple(added))


def _restore(task: Task, rel: str, target: Path) -> None:
    if rel == TASK_FILE:
        target.write_text(agent_view_of_task_file(task), encoding="utf-8")
    else:
        shutil.copy2(task.root / rel, target)


def overlay_editable(task: Task, source: Path, workspace: Path) -> list[str]:
    """Copy a candidate's editable files from ``source`` over the workspace (for ``aka eval``)."""
    copied = []
    for rel in task.editable:
        src = source / rel
        if src.is_file() and not src.is_symlink():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, workspace / rel)
            copied.append(rel)
    return copied
