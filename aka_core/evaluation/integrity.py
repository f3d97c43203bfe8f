"""Is the evaluator's installed code what it was? Digests of aka's code and Python's startup hooks.

A candidate cannot write them (its runner is confined), but an agent runs with the user's rights
and could patch the judge, a plugin, or drop a ``.pth`` startup hook that every later Python
process (judges included) would run. So:

* ``snapshot()`` hashes the files of aka-core and of every installed aka plugin, and the startup
  hooks (``*.pth``, ``sitecustomize.py``, ``usercustomize.py``) of every folder on ``sys.path``;
* a run takes one when it starts and compares before each evaluation: a difference makes that
  task (and every later one) an ``infra_error``, naming the files, since no result produced by a
  changed evaluator can be trusted;
* ``verify_installed()`` checks wheel installs against the sha256 each distribution's ``RECORD``
  lists (editable installs have no such record for their sources: they are compared with the
  snapshot only).

Third-party packages (PyTorch, Triton) are not hashed: evaluating untrusted agents calls for a
read-only installation (a container image), which docs/security.md recommends.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import attrs

AKA_DISTRIBUTION_PREFIX = "aka-"
STARTUP_HOOKS = ("sitecustomize.py", "usercustomize.py")


@attrs.frozen
class Manifest:
    files: dict[str, str]
    """path -> sha256 hex digest"""

    @property
    def digest(self) -> str:
        joined = "\n".join(f"{path} {digest}" for path, digest in sorted(self.files.items()))
        return hashlib.sha256(joined.encode()).hexdigest()


def aka_distributions() -> list[importlib.metadata.Distribution]:
    """The installed distributions named ``aka-*``. Their metadata folders are found by name
    (``aka_core-1.0.dist-info``) before any is parsed: parsing every installed distribution's
    metadata (hundreds, with PyTorch's) cost more than hashing aka's files."""
    found: dict[str, importlib.metadata.Distribution] = {}
    for entry in sys.path:
        folder = Path(entry or ".")
        try:
            names = [p for p in folder.iterdir()
                     if p.suffix in (".dist-info", ".egg-info")
                     and p.name.lower().replace("-", "_").startswith("aka_")]
        except OSError:
            continue
        for path in sorted(names):
            dist = importlib.metadata.PathDistribution(path)
            name = (dist.metadata["Name"] or "").lower()
            if name.startswith(AKA_DISTRIBUTION_PREFIX) and name not in found:
                found[name] = dist  # the first on sys.path is the one imported
    return list(found.values())


def package_folders() -> set[Path]:
    """The folders of aka's importable packages (editable installs point into a checkout)."""
    names = {"aka_core"}
    for dist in aka_distributions():
        top = dist.read_text("top_level.txt")
        if top:
            names.update(line.strip() for line in top.splitlines() if line.strip())
        names.update(ep.module.split(".")[0] for ep in dist.entry_points if ep.group == "aka")
    folders = set()
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            folders.update(Path(p).resolve() for p in spec.submodule_search_locations)
    return folders


def evaluator_files() -> list[Path]:
    files: set[Path] = set()
    for folder in package_folders():
        files.update(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".json")
                     and "__pycache__" not in p.parts)
    for entry in sys.path:
        folder = Path(entry or ".")
        if not folder.is_dir():
            continue
        files.update(folder.glob("*.pth"))
        files.update(folder / hook for hook in STARTUP_HOOKS if (folder / hook).is_file())
    return sorted(files)


_DIGESTS: dict[str, tuple[tuple[int, int, int, int], str]] = {}
SETTLED_SECONDS = 2.0
"""A file's digest is reused while its inode, size, mtime and ctime are what they were when it
was hashed, and that ctime is this old: the ctime of a write cannot be set back by anyone
but root (``utime`` sets it to now), and a file changed within the clock's resolution of the
hashing is hashed again until its ctime is well behind."""


def _sha256(path: Path) -> str:
    try:
        st = os.stat(path)
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = _DIGESTS.get(str(path))
        if known is not None and known[0] == stamp:
            return known[1]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"
    if time.time() - st.st_ctime > SETTLED_SECONDS:
        _DIGESTS[str(path)] = (stamp, digest)
    return digest


def snapshot(files: Iterable[Path] | None = None) -> Manifest:
    return Manifest({str(p): _sha256(p) for p in (evaluator_files() if files is None else files)})


def changes(before: Manifest, after: Manifest | None = None) -> list[str]:
    """Files added, removed or changed since ``before`` (relative to the current state)."""
    after = after or snapshot()
    return sorted(p for p in before.files.keys() | after.files.keys()
                  if before.files.get(p) != after.files.get(p))


def verify_installed() -> list[str]:
    """Files of aka's wheel installs whose content differs from their distribution's RECORD."""
    bad = []
    for dist in aka_distributions():
        for record in dist.files or ():
            if record.hash is None or record.hash.mode != "sha256":
                continue
            path = Path(str(dist.locate_file(record)))
            hexdigest = _sha256(path)
            if hexdigest == "unreadable":
                bad.append(f"{path} (missing)")
                continue
            digest = base64.urlsafe_b64encode(bytes.fromhex(hexdigest))
            if digest.decode().rstrip("=") != record.hash.value:
                bad.append(str(path))
    return sorted(bad)


def describe(files: list[str], limit: int = 5) -> str:
    shown = ", ".join(files[:limit])
    return shown + (f" and {len(files) - limit} more" if len(files) > limit else "")
