"""Confinement of CLI agents: what they may read and write while they work on a task.

An agent's CLI, and everything it runs (its shell commands, ``aka selfcheck``, test scripts that
use the GPU), runs inside bubblewrap (``bwrap``):

* the host's file system read-only, with the secrets hidden (empty folders mounted over them):
  the tasks folder (references, held-out cases), the repository's tests (stored solutions), the
  run directory (other tasks, the records), ``$HOME``, ``/root``, ``/home``, ``/tmp``;
* visible again inside those: its workspace (read-write), its private home (read-write), the
  task's preserved copy (read-only; ``aka selfcheck`` loads it, and its task.yaml lists no
  held-out case), the Python installation and aka's packages, the CLI's own installation, the
  folders on its ``PATH``, a configured ``config_dir`` (read-write), the GPU lock folder;
* a fresh ``/dev`` with only the GPU's devices added, read-only but for a ``/dev/shm`` of
  ``SHM_BYTES``, a fresh ``/proc`` in a new PID namespace (no other process of the host is
  visible or can be signalled), ``/proc/sys`` read-only, every capability dropped, new IPC and
  UTS namespaces;
* each hidden folder an empty in-memory folder (``tmpfs``), read-only but for ``/tmp`` and
  ``/var/tmp`` (``SCRATCH_BYTES`` each): files in a ``tmpfs`` are the host's memory, in no
  process's size, which an agent could otherwise fill until the OOM killer took aka. Where
  bubblewrap is older than 0.7 (no ``--size``) the hidden folders and ``/dev/shm`` are all
  read-only instead;
* the network as the host has it: a CLI must reach its model.

Why not Landlock, which confines the runners: the CUDA driver writes below ``/proc/<pid>`` of
the process that uses it, and Landlock can only allow that for the process that confines itself,
not for the programs an agent starts (its test scripts, ``aka selfcheck``'s judge), which would
lose the GPU. Mount and PID namespaces give each of them its own ``/proc``.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/nvidia-uvm*", "/dev/kfd", "/dev/dri")
ALWAYS_HIDDEN = ("/tmp", "/var/tmp", "/root", "/home")
SCRATCH_FOLDERS = ("/tmp", "/var/tmp")
"""Hidden folders an agent may write in (tools that ignore ``TMPDIR``): sized in-memory folders."""
SCRATCH_BYTES = 512 * 2**20
SHM_BYTES = 512 * 2**20
"""``/dev/shm`` (POSIX shared memory, semaphores: ``multiprocessing``, data loaders)."""
MOUNT_POINT_BYTES = 2**20
"""A read-only hidden folder holds only the mount points of what comes back inside it."""


@attrs.frozen(kw_only=True)
class AgentConfinement:
    """What one agent launch may see. Paths are absolute."""

    hidden: tuple[str, ...]
    read_only: tuple[str, ...]
    read_write: tuple[str, ...]
    devices: tuple[str, ...] = ()


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def plan(*, workspace: Path, private_home: Path, protected: Iterable[str | Path],
         readable: Iterable[str | Path] = (), writable: Iterable[str | Path] = (),
         programs: Iterable[str | Path] = (), search_path: str | None = None) -> AgentConfinement:
    """The confinement of one agent launch.

    ``protected`` folders are hidden, as are ``$HOME``, ``/root``, ``/home`` and ``/tmp``;
    ``readable`` (the task's preserved copy), the Python installation, aka's packages, the
    installation of each of ``programs`` (the CLI, its interpreter) and the folders on
    ``search_path`` come back read-only where they lie in a hidden folder; the workspace, the
    private home and ``writable`` come back read-write.
    """
    from aka_core.evaluation import integrity
    from aka_core.schema_validation import schemas_directory

    hidden = {os.path.realpath(p) for p in (*protected, *ALWAYS_HIDDEN, str(Path.home()))}
    # aka's JSON Schemas too: in a checkout (editable install) they lie beside the package, and a
    # checkout under $HOME or /tmp is hidden (`aka selfcheck` in the workspace validates with them).
    read_only = {os.path.realpath(p) for p in (*readable, sys.prefix, sys.base_prefix,
                                                *map(str, integrity.package_folders()),
                                                str(schemas_directory()))}
    read_only.update(str(install_root(Path(p))) for p in programs)
    home = Path.home().resolve()
    for entry in (search_path or "").split(os.pathsep):
        if entry and os.path.isdir(entry):
            folder = Path(entry).resolve()
            if folder.is_relative_to(home) and folder != home:
                # A toolchain in the home folder (~/.pyenv, ~/.local, ~/.cargo): all of it, its
                # shims and launchers use the rest of their own folder.
                read_only.add(str(home / folder.relative_to(home).parts[0]))
            else:
                read_only.add(str(folder_root(folder)))
    read_write = {os.path.realpath(p) for p in (workspace, private_home, *writable)}
    devices = sorted({path for pattern in GPU_DEVICES for path in glob.glob(pattern)})
    return AgentConfinement(
        hidden=tuple(sorted(h for h in hidden if os.path.isdir(h))),
        read_only=tuple(sorted(_only_inside(read_only - read_write, hidden))),
        read_write=tuple(sorted(p for p in read_write if os.path.isdir(p))),
        devices=tuple(devices))


def _only_inside(paths: Iterable[str], hidden: Iterable[str]) -> list[str]:
    """The paths that lie in a hidden folder (the others stay visible anyway), without those that
    are themselves a hidden folder or contain one: re-showing them would show what is hidden."""
    hidden = list(hidden)
    out = []
    for path in paths:
        if not os.path.exists(path):
            continue
        inside = any(path.startswith(h.rstrip("/") + "/") for h in hidden)
        covers = any(h == path or h.startswith(path.rstrip("/") + "/") for h in hidden)
        if inside and not covers:
            out.append(path)
    return out


def install_root(program: Path) -> Path:
    """The folder holding a program's installation: above its ``bin`` folder, else its own."""
    real = program.resolve()
    return folder_root(real.parent)


def folder_root(folder: Path) -> Path:
    folder = folder.resolve()
    root = folder.parent if folder.name == "bin" else folder
    if root == Path("/") or root in (Path.home().resolve(), Path("/root"), Path("/home")):
        return folder
    return root


def script_interpreter(program: Path, search_path: str | None) -> Path | None:
    """The interpreter a script names on its ``#!`` line (``/usr/bin/env node`` -> node)."""
    try:
        with open(program.resolve(), "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", errors="replace").split()
    if not words:
        return None
    name = words[1] if Path(words[0]).name == "env" and len(words) > 1 else words[0]
    found = name if "/" in name else shutil.which(name, path=search_path)
    return Path(found) if found else None


@functools.cache
def sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bubblewrap takes ``--size`` (0.7 and later)."""
    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in shown.stdout + shown.stderr


def wrap(argv: Sequence[str], confinement: AgentConfinement, bwrap: str) -> list[str]:
    """``argv`` run inside bubblewrap under ``confinement``."""
    sized = sizes_tmpfs(bwrap)
    args = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--ro-bind", "/proc/sys", "/proc/sys"]
    for device in confinement.devices:
        args += ["--dev-bind", device, device]
    if sized:
        args += ["--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    # Nothing else in /dev is written: bubblewrap's /dev is a tmpfs as large as half the host's
    # memory (the devices stay usable on a read-only mount).
    args += ["--remount-ro", "/dev"]
    # Parents before children: a folder hidden inside a hidden folder is mounted after it.
    for folder in sorted(confinement.hidden, key=lambda p: p.count("/")):
        if sized and folder in SCRATCH_FOLDERS:
            args += ["--perms", "1777", "--size", str(SCRATCH_BYTES), "--tmpfs", folder]
        else:
            args += ["--perms", "0555", *(["--size", str(MOUNT_POINT_BYTES)] if sized else []),
                     "--tmpfs", folder]
    for folder in sorted(confinement.read_only, key=lambda p: p.count("/")):
        args += ["--ro-bind", folder, folder]
    for folder in sorted(confinement.read_write, key=lambda p: p.count("/")):
        args += ["--bind", folder, folder]
    return [*args, "--", *argv]


def describe(confinement: AgentConfinement, bwrap: str | None = None) -> dict[str, object]:
    described: dict[str, object] = {
        "mechanism": "bubblewrap", "hidden": list(confinement.hidden),
        "read_only": list(confinement.read_only), "read_write": list(confinement.read_write)}
    if bwrap is not None:
        described["in_memory_folders"] = (
            f"/tmp and /var/tmp {SCRATCH_BYTES >> 20} MiB, /dev/shm {SHM_BYTES >> 20} MiB, "
            "the other hidden folders and /dev read-only" if sizes_tmpfs(bwrap) else
            "all read-only (this bubblewrap cannot size them)")
    return described


def environment_for(env: Mapping[str, str], private_home: Path) -> dict[str, str]:
    """The CLI's variables inside: temporary files in its private home (``/tmp`` is empty and
    private there anyway)."""
    tmp = private_home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {**env, "TMPDIR": str(tmp)}
