"""Task workspaces: a private copy for the agent, a preserved baseline, and integrity checks.

Before the agent starts, every file of the task is hashed. Afterwards only the task's declared
editable files may differ: a protected file that was changed or removed is restored from the task
and recorded (the candidate is then rejected); files the agent added are listed and left alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from aka_core.models import IntegrityReport, Task

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


def check_and_restore(task: Task, workspace: Path) -> IntegrityReport:
    """Compare the workspace with the task; restore protected files; list what changed."""
    original = digests(task.root)
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
        shutil.copy2(task.root / rel, target)
    added = sorted(set(current) - set(original))
    escaped = [rel for rel in changed if (workspace / rel).is_symlink()]
    for rel in escaped:  # an editable file replaced by a symlink could point anywhere
        changed.remove(rel)
        restored.append(rel)
        (workspace / rel).unlink()
        shutil.copy2(task.root / rel, workspace / rel)
    return IntegrityReport(ok=not restored, changed_files=tuple(sorted(changed)),
                           restored_files=tuple(sorted(restored)), added_files=tuple(added))


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
