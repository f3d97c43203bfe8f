"""Is the evaluator's installed code what it was? Digests of aka's code and Python's startup hooks.

A candidate cannot write them (its runner is confined), but an agent runs with the user's rights
and could patch the judge, a plugin, or drop a ``.pth`` startup hook that every later Python
process (judges included) would run. So:

* ``snapshot()`` hashes the files of aka-core and of every installed aka plugin, and the startup
  hooks (``*.pth``, ``sitecustomize``, ``usercustomize`` in every form Python imports them) of
  every folder on ``sys.path``;
* the bytecode Python keeps beside them (``__pycache__/*.pyc``) is run in place of the source
  whenever its header says so, whatever its code: an unchecked-hash pyc always, a timestamp pyc
  whenever it names the source's mtime and size. So each pyc Python would use is unmarshalled
  and compared with the source compiled here (code objects compare their instructions,
  constants, names and nested code); one that differs, or that Python would refuse, is in every
  snapshot as ``BAD`` and every ``changes`` names it, however long it was there. A pyc Python
  would not use (stale, another Python's is hashed as a file) is left out, so that legitimate
  compilation during a run is no change. An extension module beside a source of the same name
  (imported in its place) and bytecode with no source (imported as the module) are ``BAD`` too;
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
import importlib.machinery
import importlib.metadata
import importlib.util
import marshal
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import attrs

AKA_DISTRIBUTION_PREFIX = "aka-"
STARTUP_HOOKS = ("sitecustomize", "usercustomize")
BAD = "bad:"
"""Starts the manifest entry of a file that makes the evaluator untrustworthy wherever it came
from (bytecode that is not its source's, a compiled module shadowing a source)."""
BAD_BYTECODE = "bytecode that is not its source's"
HASH_LIMIT_BYTES = 64 * 2**20
"""A larger file (no file of aka's is) is fingerprinted by its metadata, not read."""
EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


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
    """Every file of aka's packages (their bytecode caches included: ``snapshot`` checks those
    against their sources), and the startup hooks of every folder on ``sys.path``."""
    from aka_core.run.workspace import walk

    files: set[Path] = set()
    for folder in package_folders():
        files.update(folder / rel for rel in walk(folder).entries)
    for entry in sys.path:
        folder = Path(entry or ".")
        if folder.is_dir():
            files.update(_startup_hooks(folder))
    return sorted(files)


def _startup_hooks(folder: Path) -> set[Path]:
    """``*.pth`` files and every form of ``sitecustomize``/``usercustomize`` Python could import
    from ``folder`` at start-up (source, bytecode, an extension module, a package)."""
    from aka_core.run.workspace import walk

    found = set(folder.glob("*.pth"))
    for hook in STARTUP_HOOKS:
        for path in [*folder.glob(f"{hook}.*"), *(folder / "__pycache__").glob(f"{hook}.*.pyc")]:
            found.add(path)
        package = folder / hook
        if package.is_dir() and not package.is_symlink():
            found.update(package / rel for rel in walk(package).entries)
    return {path for path in found if path.is_file()}


_DIGESTS: dict[str, tuple[tuple[int, int, int, int], str]] = {}
_VERDICTS: dict[str, tuple[tuple[tuple[int, int, int, int], ...], str | None]] = {}
SETTLED_SECONDS = 2.0
"""A file's digest is reused while its inode, size, mtime and ctime are what they were when it
was hashed, and that ctime is this old: the ctime of a write cannot be set back by anyone
but root (``utime`` sets it to now), and a file changed within the clock's resolution of the
hashing is hashed again until its ctime is well behind. Bytecode verdicts are reused alike,
while both the pyc and its source are unchanged."""


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _settled(*stats: os.stat_result) -> bool:
    return all(time.time() - st.st_ctime > SETTLED_SECONDS for st in stats)


def _sha256(path: Path) -> str:
    try:
        st = os.stat(path)
        stamp = _stamp(st)
        known = _DIGESTS.get(str(path))
        if known is not None and known[0] == stamp:
            return known[1]
        if st.st_size > HASH_LIMIT_BYTES:
            return "large:{}:{}:{}:{}".format(*stamp)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"
    if _settled(st):
        _DIGESTS[str(path)] = (stamp, digest)
    return digest


def _fingerprint(path: Path) -> str | None:
    """The manifest's entry for ``path``: its sha256, ``BAD ...`` when it makes the evaluator
    untrustworthy, or None for bytecode Python would use only as its unchanged source."""
    if path.parent.name == "__pycache__" and path.suffix == ".pyc":
        return _bytecode_entry(path)
    shadowed = _shadowed_source(path)
    if shadowed is not None:
        return f"{BAD}{shadowed}:{_sha256(path)}"
    return _sha256(path)


def _shadowed_source(path: Path) -> str | None:
    """Why a compiled module outside ``__pycache__`` runs in place of aka's source, or None."""
    for suffix in EXTENSION_SUFFIXES:
        if path.name.endswith(suffix):
            source = path.with_name(path.name[:-len(suffix)] + ".py")
            return "an extension module imported in place of its source" if source.exists() else None
    if path.suffix == ".pyc" and not path.with_suffix(".py").exists():
        return "bytecode imported as a module that has no source"
    return None


def _bytecode_entry(pyc: Path) -> str | None:
    """None when Python would run ``pyc`` only as its unchanged source compiled (or not at all);
    its sha256 when it belongs to another Python; ``BAD`` otherwise."""
    parts = pyc.name.split(".")
    optimize = parts[2] if len(parts) == 4 else "opt-0"
    source = pyc.parent.parent / f"{parts[0]}.py"
    if len(parts) not in (3, 4) or optimize not in ("opt-0", "opt-1", "opt-2") or not source.is_file():
        return None  # a name importlib never reads
    if parts[1] != sys.implementation.cache_tag:
        return _sha256(pyc)  # another Python's: cannot be compared here, any change is seen
    try:
        stats = (os.stat(pyc), os.stat(source))
    except OSError:
        return None
    stamps = tuple(_stamp(st) for st in stats)
    known = _VERDICTS.get(str(pyc))
    if known is not None and known[0] == stamps:
        return known[1]
    verdict = _bytecode_verdict(pyc, source, stats[1], int(optimize.removeprefix("opt-")))
    entry = None if verdict is None else f"{BAD}{verdict}:{_sha256(pyc)}"
    if _settled(*stats):
        _VERDICTS[str(pyc)] = (stamps, entry)
    return entry


def _bytecode_verdict(pyc: Path, source: Path, source_stat: os.stat_result,
                      optimize: int) -> str | None:
    """Why Python would run ``pyc`` where its code is not ``source``'s, or None (it would not run
    it at all, or its code is the source's). importlib's own rules decide whether it is used."""
    import _imp

    try:
        if os.stat(pyc).st_size > HASH_LIMIT_BYTES:
            return BAD_BYTECODE
        data, text = pyc.read_bytes(), source.read_bytes()
    except OSError:
        return None
    if len(data) < 16 or data[:4] != importlib.util.MAGIC_NUMBER:
        return None  # refused: the source is compiled instead
    flags = int.from_bytes(data[4:8], "little")
    if flags & ~0b11:
        return "bytecode Python refuses to import (the module would not load)"
    if not flags & 0b01:  # a timestamp pyc (whatever bit 1 says): used while mtime and size match
        if (int.from_bytes(data[8:12], "little") != int(source_stat.st_mtime) & 0xFFFFFFFF
                or int.from_bytes(data[12:16], "little") != source_stat.st_size & 0xFFFFFFFF):
            return None  # stale: the source is compiled instead
    elif (_imp.check_hash_based_pycs != "never"
          and (flags & 0b10 or _imp.check_hash_based_pycs == "always")
          and data[8:16] != importlib.util.source_hash(text)):
        return None  # a checked hash that differs: the source is compiled instead
    # otherwise used: an unchecked-hash pyc whatever the source says, the others as they match
    try:
        code = marshal.loads(data[16:])
        expected = compile(text, str(source), "exec", dont_inherit=True, optimize=optimize)
    except (ValueError, TypeError, EOFError, SyntaxError, MemoryError):
        return BAD_BYTECODE
    return None if code == expected else BAD_BYTECODE


def snapshot(files: Iterable[Path] | None = None) -> Manifest:
    entries = {str(p): _fingerprint(p) for p in (evaluator_files() if files is None else files)}
    return Manifest({path: entry for path, entry in entries.items() if entry is not None})


def changes(before: Manifest, after: Manifest | None = None) -> list[str]:
    """Files added, removed or changed since ``before`` (relative to the current state), and
    every file ``BAD`` now, however long it has been (each with why)."""
    after = after or snapshot()
    changed = {p for p in before.files.keys() | after.files.keys()
               if before.files.get(p) != after.files.get(p)}
    changed |= {p for p, entry in after.files.items() if entry.startswith(BAD)}
    return sorted(_with_reason(p, after.files.get(p, "")) for p in changed)


def _with_reason(path: str, entry: str) -> str:
    return f"{path} ({entry.removeprefix(BAD).rpartition(':')[0]})" if entry.startswith(BAD) else path


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
