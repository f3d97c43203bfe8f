"""Compiled kernels kept between evaluations, keyed by what produced them.

Each runner compiles into a private cache in its scratch folder (Triton's cache, aka's native
builds, the driver's JIT cache: everything under ``$XDG_CACHE_HOME`` there), so nothing one side
writes is ever read by another side or by another candidate. Starting from an empty cache made
every evaluation recompile every kernel of both sides (seconds per Triton specialisation), so the
judge keeps each private cache, after the evaluation, under a key of its content's origin:

    sha256(side, task, backend, backend environment, tool versions, every entry of the side's folder)

and copies it into the next evaluation's scratch folder with the same key before that runner
starts. A cache therefore only ever returns to the code that wrote it (the same baseline of the
same task, or byte-identical candidate files, ``__pycache__`` and ``.git`` included: nothing in
the folder is left out of the key): a candidate can put anything in its cache, and it reaches
only itself. A folder whose key cannot be made (too large, too deep, a file that changes while
it is read) gets no cache, never an error. The judge alone reads and writes the store: the
runners' sandbox protects it, and the judge neither restores nor keeps anything for runners that
are not confined (they could write into the store directly). Each entry has a manifest of its
files' sha256; an entry whose files differ from it is discarded (a cold cache). Only regular
files are kept (no links), an entry over ``ENTRY_LIMIT_BYTES`` is not kept, and the store is
trimmed, least recently used first, to ``STORE_LIMIT_BYTES``.

Nothing that runs before the judge holds the GPU is kept: Triton's driver utilities
(``DRIVER_UTILITIES``, a shared library its driver loads when the runner's trusted preload
starts it, before the lock) are left out of every entry, and an entry that holds one is
discarded. Kept, a candidate could have put a library of its own there and had it run, in its
next evaluation, outside the lock (beside another evaluation's timing) and before anything of
its side is judged (an exit there is the host's fault: ``infra_error``, retried). Each runner
compiles them again instead (about a second, before the lock; a pre-started runner has them).

Triton's cache names each compiled kernel's files in a group file (``__grp__<name>.json``) by
absolute path, and counts a kernel whose group names a missing file as not compiled: a cache
copied to another folder would recompile everything. The store therefore keeps those paths
relative to the cache folder (``GROUP_ROOT`` stands for it) and the restore points them at the
new folder.

``AKA_KERNEL_CACHE``: the store's folder (default ``$XDG_CACHE_HOME/aka/kernel-cache``), or
``off`` for a cold cache in every evaluation.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import stat
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aka_core.bounded_files import read_exactly
from aka_core.run.workspace import digest, walk

ENV = "AKA_KERNEL_CACHE"
ENTRY_LIMIT_BYTES = 256 * 2**20
ENTRY_LIMIT_FILES = 20_000
STORE_LIMIT_BYTES = 8 * 2**30
SIDE_LIMIT_BYTES = 256 * 2**20  # a side's folder larger than this is not hashed: no cache
SIDE_LIMIT_FILES = 5_000
INFO = "entry.json"
TOOLS = ("torch", "triton", "aka-core")
GROUP_ROOT = "aka-cache:"  # stands for the cache folder in a stored Triton group file
GROUP_LIMIT_BYTES = 1 << 20
DRIVER_UTILITIES = ("cuda_utils", "hip_utils")
"""Names of the modules Triton's drivers compile into the cache and load when they start."""


def store() -> Path | None:
    """The store's folder, or None when switched off."""
    value = os.environ.get(ENV, "")
    if value.lower() in ("off", "0", "none"):
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aka" / "kernel-cache"


@functools.cache
def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {"python": sys.version.split()[0]}
    for name in TOOLS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def folder_digest(root: Path) -> str | None:
    """sha256 over every entry of the side's folder, caches and ``.git`` included (anything in
    it may change what runs, and the store's promise is byte-identical files): each file's
    relative path and content, each link's target, each folder's and special file's name. None
    (no key: a cold cache) when the folder is too large, too deep or unreadable."""
    try:
        return _folder_digest(root)
    except (OSError, ValueError):  # a name or a file that cannot be read as the walk saw it
        return None


def _folder_digest(root: Path) -> str | None:
    tree = walk(root, max_entries=SIDE_LIMIT_FILES)
    if not tree.complete:
        return None
    h = hashlib.sha256()
    total = 0
    for rel in sorted(tree.folders, key=os.fsencode):
        h.update(b"D" + os.fsencode(rel) + b"\0")
    for rel in sorted(tree.entries, key=os.fsencode):
        info, name, path = tree.entries[rel], os.fsencode(rel), root / rel
        if stat.S_ISLNK(info.st_mode):
            h.update(b"L" + name + b"\0" + os.fsencode(os.readlink(path)) + b"\0")
        elif not stat.S_ISREG(info.st_mode):
            h.update(b"S" + name + f"\0{stat.S_IFMT(info.st_mode)}\0".encode())
        else:
            total += info.st_size
            if total > SIDE_LIMIT_BYTES:
                return None
            h.update(b"F" + name + f"\0{info.st_size}\0".encode())
            # Still a regular file of the size the walk saw, or no key (``folder_digest``).
            h.update(read_exactly(path, info.st_size))
    return h.hexdigest()


def key(side: str, task_id: str, backend: str, backend_env: dict[str, str], root: Path
        ) -> str | None:
    """The cache key of one side's compiled kernels, or None (no cache for this side)."""
    files = folder_digest(root)
    if files is None:
        return None
    origin = {"side": side, "task": task_id, "backend": backend,
              "env": sorted(backend_env.items()), "tools": _versions(), "files": files}
    return hashlib.sha256(json.dumps(origin, sort_keys=True).encode()).hexdigest()


def restore(cache_key: str | None, target: Path) -> dict[str, Any]:
    """Copy the entry of ``cache_key`` into ``target`` (a runner's cache folder, before it
    starts); a missing or unreadable entry is a cold cache, never an error."""
    root = store()
    if root is None or cache_key is None:
        return {"used": False, "reason": "off" if root is None else "side folder not hashed"}
    entry = root / cache_key
    started = time.monotonic()
    if not entry.is_dir():
        return {"used": False, "reason": "miss"}
    info = _read_info(entry)
    digests = info.get("digests") if info else None
    try:
        if not isinstance(digests, dict):
            raise OSError("no manifest")
        shutil.copytree(entry / "files", target, symlinks=True, dirs_exist_ok=True)
        copied = _regular_files(target, utilities=True)
        found = {} if copied is None else {path.relative_to(target).as_posix(): digest(path)
                                           for path, _ in copied}
        if found != digests:
            raise OSError("its files differ from its manifest")
        if any(Path(name).name.startswith(DRIVER_UTILITIES) for name in found):
            raise OSError("it holds a driver's utilities (kept before they were left out)")
        for path, _ in copied or ():
            if _is_group(path):
                path.write_bytes(_group_paths(path.read_bytes(), GROUP_ROOT, str(target)))
        with contextlib.suppress(OSError):
            os.utime(entry)  # recently used: trimmed last
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True, exist_ok=True)
        _discard(entry)
        return {"used": False, "reason": f"entry discarded: {exc}"[:200]}
    # What the runner starts with, to tell after it whether it added anything.
    restored = _regular_files(target) or []
    return {"used": True, "files": len(digests), "bytes": sum(size for _, size in restored),
            "seconds": round(time.monotonic() - started, 4)}


def _is_group(path: Path) -> bool:
    return path.name.startswith("__grp__") and path.name.endswith(".json")


def _group_paths(data: bytes, old: str, new: str) -> bytes:
    """A Triton group file with each child path under ``old`` moved under ``new``; anything
    else (not a group, too large, a path elsewhere or climbing out) is left as it is: Triton
    then recompiles that kernel, which is slower but never wrong."""
    if len(data) > GROUP_LIMIT_BYTES:
        return data
    try:  # nested past the interpreter's depth (a candidate's file): left as it is too
        group = json.loads(data)
        children = group.get("child_paths") if isinstance(group, dict) else None
        if not isinstance(children, dict):
            return data
        prefix = old.rstrip("/") + "/"
        moved = {}
        for name, path in children.items():
            if (isinstance(path, str) and path.startswith(prefix)
                    and ".." not in Path(path[len(prefix):]).parts):
                path = new.rstrip("/") + "/" + path[len(prefix):]
            moved[name] = path
        return json.dumps({**group, "child_paths": moved}).encode()
    except (ValueError, RecursionError):
        return data


def _discard(entry: Path) -> None:
    stale = entry.with_name(f".old-{uuid.uuid4().hex}")
    with contextlib.suppress(OSError):
        entry.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)


def _regular_files(folder: Path, utilities: bool = False) -> list[tuple[Path, int]] | None:
    """Every regular file below ``folder`` with its size (links, special files and, unless
    ``utilities``, the drivers' utilities are skipped), or None when the folder holds more than
    an entry may keep."""
    found: list[tuple[Path, int]] = []
    total = 0
    for dirpath, _, filenames in os.walk(folder):  # links to folders are not followed
        for name in filenames:
            path = Path(dirpath) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or (name.startswith(DRIVER_UTILITIES)
                                                   and not utilities):
                continue
            total += info.st_size
            found.append((path, info.st_size))
            if total > ENTRY_LIMIT_BYTES or len(found) > ENTRY_LIMIT_FILES:
                return None
    return found


def save(cache_key: str | None, source: Path, restored: dict[str, Any]) -> dict[str, Any]:
    """Keep ``source`` (a runner's cache folder, after the runner is gone) as the entry of
    ``cache_key``, when it holds files the entry lacked."""
    root = store()
    if root is None or cache_key is None or not source.is_dir():
        return {"saved": False}
    files = _regular_files(source)
    if files is None:
        return {"saved": False, "reason": f"over {ENTRY_LIMIT_BYTES >> 20} MiB"}
    entry = root / cache_key
    if not files or (restored.get("used") and restored.get("files") == len(files)
                     and restored.get("bytes") == sum(size for _, size in files)):
        return {"saved": False, "reason": "nothing new"}
    started = time.monotonic()
    fresh = root / f".new-{uuid.uuid4().hex}"
    digests: dict[str, str] = {}
    try:
        for path, _ in files:
            rel = path.relative_to(source)
            (fresh / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            if _is_group(path):
                data = _group_paths(data, str(source), GROUP_ROOT)
            with open(fresh / "files" / rel, "xb") as dst:
                dst.write(data)
            digests[rel.as_posix()] = digest(fresh / "files" / rel)
        info = {"files": len(files), "bytes": sum(size for _, size in files),
                "saved_at": time.time()}
        (fresh / INFO).write_text(json.dumps({**info, "digests": digests}))
        _replace(fresh, entry)
    except OSError as exc:
        shutil.rmtree(fresh, ignore_errors=True)
        return {"saved": False, "reason": f"{type(exc).__name__}: {exc}"[:200]}
    trim(root)
    return {"saved": True, "seconds": round(time.monotonic() - started, 4), **info}


def _replace(fresh: Path, entry: Path) -> None:
    """Put ``fresh`` at ``entry`` (another evaluation may be reading or writing the same key:
    readers of a vanished entry see a miss, and the last writer wins)."""
    if entry.exists():
        _discard(entry)
    try:
        fresh.rename(entry)
    except OSError:  # another evaluation's entry got there first: keep theirs
        shutil.rmtree(fresh, ignore_errors=True)


def _read_info(entry: Path) -> dict[str, Any] | None:
    try:
        info = json.loads((entry / INFO).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def trim(root: Path, limit: int = STORE_LIMIT_BYTES) -> int:
    """Delete the least recently used entries until the store is within ``limit``; returns how
    many were deleted."""
    entries = []
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            if entry.name.startswith("."):
                if entry.name.startswith((".new-", ".old-")) and _age(entry) > 3600:
                    shutil.rmtree(entry, ignore_errors=True)  # left by a killed judge
                continue
            info = _read_info(entry)
            entries.append((_mtime(entry), entry, int(info.get("bytes", 0)) if info else 0))
    total = sum(size for _, _, size in entries)
    deleted = 0
    for _, entry, size in sorted(entries, key=lambda item: item[0]):
        if total <= limit:
            break
        shutil.rmtree(entry, ignore_errors=True)
        total -= size
        deleted += 1
    return deleted


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _age(path: Path) -> float:
    return time.time() - _mtime(path)
