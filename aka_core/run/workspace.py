"""Task workspaces: a private copy for the agent, a preserved baseline, and integrity checks.

Before the agent starts, every file of the task is hashed. Afterwards only the task's declared
editable files may differ: a protected file that was changed or removed is restored from the task
and recorded (the candidate is then rejected); files the agent added are listed and left alone.

The agent wrote the workspace, so nothing here trusts its shape. Folders are walked without
recursion and without following links, within caps on depth, path length and entries (``walk``):
what lies beyond them is removed and rejects the candidate. A file is read only up to the size
its original had (a protected file of another size is changed without being read; an added file
is never read). A protected file is restored only into a real folder of the workspace: a link or
a file where the task has a folder is replaced by a folder first, never written through.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import shutil
import stat
import uuid
from pathlib import Path

from aka_core.bounded_files import MAX_PATH_BYTES, RefusedFile, sha256_exactly
from aka_core.models import TASK_FILE, IntegrityReport, Task

IGNORED_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
MAX_DEPTH = 32
"""Folders nested deeper than this are beyond a walk (Python's own walks recurse once per level
and fail near a thousand)."""
MAX_ENTRIES = 200_000
"""The most files and folders a walk lists (the agent's disk watch stops it at as many)."""
HASH_LIMIT_BYTES = 64 * 2**20
"""A file larger than this is fingerprinted by its metadata, not read (no task ships one: only
a file an agent made is that large, a sparse one of terabytes included)."""
HASH_BUDGET_BYTES = 2**30
"""The most one ``digests`` reads; files past it are fingerprinted by their metadata."""
LISTED_PROBLEMS = 5


@dataclasses.dataclass
class Tree:
    """What ``walk`` found below a folder, links not followed. Paths are relative, ``/``-joined
    (names that are not UTF-8 keep their bytes as surrogates: ``os.fsencode`` gives them back)."""

    entries: dict[str, os.stat_result] = dataclasses.field(default_factory=dict)
    """Files, links and special files, with their ``lstat``."""
    folders: list[str] = dataclasses.field(default_factory=list)
    beyond: list[str] = dataclasses.field(default_factory=list)
    """Entries past the depth or path-length cap: neither listed nor entered."""
    unreadable: list[str] = dataclasses.field(default_factory=list)
    """Folders that could not be listed."""
    truncated: bool = False
    """The walk stopped at its entry cap: there is more than it listed."""

    @property
    def complete(self) -> bool:
        return not (self.beyond or self.unreadable or self.truncated)


def walk(root: Path, *, max_entries: int | None = None, max_depth: int = MAX_DEPTH,
         max_path_bytes: int = MAX_PATH_BYTES, repair: bool = False) -> Tree:
    """Every entry below ``root``, iteratively and without following links, within the caps
    (``max_entries`` defaults to ``MAX_ENTRIES``); with ``repair``, a folder that cannot be
    listed is made readable (``u+rwx``) first."""
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    tree = Tree()
    pending = [""]
    seen = 0
    while pending:
        rel_dir = pending.pop()
        listing = _list_folder(os.path.join(root, rel_dir) if rel_dir else str(root), repair)
        if listing is None:
            tree.unreadable.append(rel_dir)
            continue
        for entry in listing:
            seen += 1
            if seen > max_entries:
                tree.truncated = True
                return tree
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if rel.count("/") >= max_depth or len(os.fsencode(rel)) > max_path_bytes:
                tree.beyond.append(rel)
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            if stat.S_ISDIR(info.st_mode):
                tree.folders.append(rel)
                pending.append(rel)
            else:
                tree.entries[rel] = info
    return tree


def _list_folder(folder: str, repair: bool) -> list[os.DirEntry[str]] | None:
    if repair:
        with contextlib.suppress(OSError):
            mode = os.lstat(folder).st_mode
            if stat.S_ISDIR(mode) and stat.S_IMODE(mode) & stat.S_IRWXU != stat.S_IRWXU:
                os.chmod(folder, stat.S_IMODE(mode) | stat.S_IRWXU)
    try:
        with os.scandir(folder) as listing:
            return list(listing)
    except OSError:
        return None


def _ignored(rel: str) -> bool:
    return any(part in IGNORED_PARTS for part in rel.split("/"))


# -- digests -------------------------------------------------------------------------------------

def digest(path: Path) -> str:
    """sha256 of a file's content, or a link's target (for files aka wrote itself)."""
    if path.is_symlink():
        return "symlink:" + os.readlink(path)
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _content_sha256(path: Path, size: int) -> str | None:
    """sha256 of the regular file at ``path`` when it holds exactly ``size`` bytes (never read
    through a link, never beyond ``size``), else None: the fingerprint then says ``unreadable``,
    which no intact file's fingerprint is."""
    try:
        return sha256_exactly(path, size)
    except (OSError, RefusedFile):
        return None


def _fingerprint(path: Path, info: os.stat_result, budget: list[int]) -> str:
    """What a file is, read within ``budget`` (bytes left, updated): ``<size>:<sha256>`` for a
    regular file, its metadata for one too large to read, a link's target, a special file's type."""
    if stat.S_ISLNK(info.st_mode):
        try:
            return "symlink:" + os.readlink(path)
        except OSError:
            return "symlink:?"
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.S_IFMT(info.st_mode):o}"
    size = info.st_size
    if size > HASH_LIMIT_BYTES or size > budget[0]:
        return f"{size}:unread:{info.st_ino}:{info.st_mtime_ns}:{info.st_ctime_ns}"
    budget[0] -= size
    return f"{size}:{_content_sha256(path, size) or 'unreadable'}"


def digests(root: Path) -> dict[str, str]:
    """A fingerprint of every file below ``root`` (caches left out), read within
    ``HASH_BUDGET_BYTES``; what a walk could not reach is an entry too, so that it differs."""
    tree = walk(root)
    budget = [HASH_BUDGET_BYTES]
    found = {rel: _fingerprint(root / rel, tree.entries[rel], budget)
             for rel in sorted(tree.entries) if not _ignored(rel)}
    found.update({rel: "beyond the walk's limits" for rel in tree.beyond})
    found.update({rel or ".": "unreadable folder" for rel in tree.unreadable})
    if tree.truncated:
        found["..."] = f"more than {MAX_ENTRIES} entries"
    return found


def _unchanged(path: Path, before: str) -> bool:
    """Whether ``path`` is still what its fingerprint ``before`` says, reading no more than the
    original's size (a file of another size has changed: it is not read at all)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    size, _, sha = before.partition(":")
    if size.isdigit() and len(sha) == 64:
        return (stat.S_ISREG(info.st_mode) and info.st_size == int(size)
                and _content_sha256(path, info.st_size) == sha)
    return _fingerprint(path, info, [HASH_LIMIT_BYTES]) == before


# -- copies of the task -------------------------------------------------------------------------

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
    tree = walk(root)
    for rel in ["", *tree.folders, *tree.entries]:
        path = root / rel
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


# -- removal ------------------------------------------------------------------------------------

def remove_tree(root: Path) -> None:
    """Remove ``root`` (a folder, a file or a link: never what a link points to), whatever its
    depth or permissions."""
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        _remove_folder(root)
    else:
        os.unlink(root)


_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _remove_folder(folder: Path) -> None:
    """Empty and remove ``folder`` with a bounded path and two descriptors at any depth: each
    subfolder's subfolders are moved up into ``folder`` before the subfolder is emptied, so a
    chain of any length is removed one level per pass, and no path ever grows."""
    with contextlib.suppress(OSError):
        os.chmod(folder, stat.S_IMODE(os.lstat(folder).st_mode) | stat.S_IRWXU)
    top = os.open(folder, _OPEN_FOLDER)
    tag = uuid.uuid4().hex[:12]
    moved = 0
    try:
        while True:
            with os.scandir(top) as listing:
                names = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listing]
            if not names:
                break
            for name, is_folder in names:
                if not is_folder:
                    os.unlink(name, dir_fd=top)
                    continue
                with contextlib.suppress(OSError):
                    os.chmod(name, stat.S_IRWXU, dir_fd=top)  # a folder, not a link: lstat said
                sub = os.open(name, _OPEN_FOLDER, dir_fd=top)
                try:
                    with os.scandir(sub) as listing:
                        children = [(c.name, c.is_dir(follow_symlinks=False)) for c in listing]
                    for child, child_is_folder in children:
                        if child_is_folder:
                            moved += 1
                            os.rename(child, f".aka-removing-{tag}-{moved}", src_dir_fd=sub,
                                      dst_dir_fd=top)
                        else:
                            os.unlink(child, dir_fd=sub)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(folder)


# -- the integrity check ------------------------------------------------------------------------

def check_and_restore(task: Task, workspace: Path, original: dict[str, str]) -> IntegrityReport:
    """Compare the workspace with its state before the agent (``original``, from
    ``prepare_workspace``); restore protected files from the task; list what changed. What the
    agent left beyond the walk's caps is removed, and a link (or a file) where the task has a
    folder is replaced by the folder: both reject the candidate, and are named in
    ``restored_files`` with what to do."""
    tree = walk(workspace, repair=True)
    problems = _remove_beyond_the_caps(workspace, tree)
    editable = set(task.editable)
    changed: list[str] = []
    restored: list[str] = []
    replaced: set[str] = set()
    for rel, before in sorted(original.items()):
        in_the_way = _not_a_folder_on_the_way(workspace, rel)
        if in_the_way is not None:
            problems.append(_replace_with_folder(workspace, in_the_way))
            replaced.add(in_the_way)
        target = workspace / rel
        if _unchanged(target, before):
            continue
        if rel in editable and not target.is_symlink():
            changed.append(rel)  # an editable file replaced by a link could point anywhere
            continue
        restored.append(rel)
        try:
            _restore(task, rel, workspace)
        except OSError as exc:
            problems.append(f"{rel} (could not be restored from the task: {exc})")
    added = sorted(rel for rel in tree.entries
                   if rel not in original and rel not in replaced and not _ignored(rel))
    return IntegrityReport(ok=not restored and not problems, changed_files=tuple(sorted(changed)),
                           restored_files=(*sorted(restored), *problems), added_files=tuple(added))


def _remove_beyond_the_caps(workspace: Path, tree: Tree) -> list[str]:
    """Remove what the walk could not reach; say what, and what to do."""
    problems = []
    if tree.beyond:
        for rel in tree.beyond:
            with contextlib.suppress(OSError):
                remove_tree(workspace / rel)
        problems.append(
            f"{_some(tree.beyond)} (nested deeper than {MAX_DEPTH} folders or with a path longer "
            f"than {MAX_PATH_BYTES} bytes: removed; keep the workspace's files within those "
            "limits)")
    if tree.unreadable:
        problems.append(f"{_some(tree.unreadable)} (folders that cannot be listed even after "
                        "making them readable: leave the workspace readable)")
    if tree.truncated:
        problems.append(f"the workspace holds more than {MAX_ENTRIES} files and folders, more "
                        "than its integrity check reads (not all of its added files are listed): "
                        "delete what the candidate does not need")
    return problems


def _some(paths: list[str]) -> str:
    shown = ", ".join(sorted(paths)[:LISTED_PROBLEMS])
    more = len(paths) - LISTED_PROBLEMS
    return shown + (f" and {more} more" if more > 0 else "")


def _not_a_folder_on_the_way(workspace: Path, rel: str) -> str | None:
    """The first folder on the way to ``rel`` that is something else in the workspace (a link,
    which a write would follow out of it, or a file), or None."""
    parts = rel.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        try:
            mode = os.lstat(workspace / prefix).st_mode
        except FileNotFoundError:
            return None  # made as a real folder when a file under it is restored
        if not stat.S_ISDIR(mode):
            return prefix
    return None


def _replace_with_folder(workspace: Path, rel: str) -> str:
    path = workspace / rel
    kind = "a link" if path.is_symlink() else "a file"
    os.unlink(path)  # the link itself, never where it points
    path.mkdir()
    return (f"{rel} ({kind} where the task has a folder: replaced by the task's folder, nothing "
            "written through it; ship real files in the task's folders)")


def _restore(task: Task, rel: str, workspace: Path) -> None:
    """Put the task's ``rel`` back, writing only inside the workspace's own folders."""
    target = workspace / rel
    for parent in reversed(target.relative_to(workspace).parents[:-1]):
        with contextlib.suppress(FileExistsError):
            (workspace / parent).mkdir()
    real_parent = Path(os.path.realpath(target.parent))
    if not real_parent.is_relative_to(os.path.realpath(workspace)):
        raise OSError(f"its folder leads out of the workspace (to {real_parent})")
    remove_tree(target)
    source = task.root / rel
    data = (agent_view_of_task_file(task).encode() if rel == TASK_FILE
            else source.read_bytes())
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    if rel != TASK_FILE:
        shutil.copystat(source, target)


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
