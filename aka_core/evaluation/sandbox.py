"""Confinement of the processes that run candidate and baseline code (the runners).

A runner applies its ``SandboxSpec`` first thing, before it imports PyTorch or any code it was
asked to run, with Linux facilities a process can apply to itself:

* **Landlock** (Linux 5.13+, raw syscalls, no library): the file system becomes an allowlist.
  Reading is allowed only below the system folders, the Python installation and the package
  folders the runner needs; writing only in its scratch folder; devices by name. Protected folders
  (the tasks folder, the run directory, the repository's tests, ``$HOME``, ``/tmp``) are carved out
  of every allowed folder that contains them. Landlock also stops the runner from tracing or
  reading the memory of processes outside its domain (the judge, the other runner), from
  signalling them (ABI 6), and from reaching abstract Unix sockets outside it (ABI 6).
* **Network**: a new, empty network namespace when the process may create one (root, or an
  unprivileged user namespace); otherwise Landlock's TCP bind/connect restriction (ABI 4).
* **Capabilities**: a root runner drops every capability, including the bounding set, so neither
  it nor anything it executes can load kernel modules, remount, or override file permissions.
* ``no_new_privs``: set-uid programs gain nothing.
* **seccomp** (``seccomp``): other processes' resource limits, priorities and scheduling cannot
  be changed; no System V IPC, ``io_uring``, secret memory or message queues; no connected
  sockets of its own unless the spec allows them (``SandboxSpec.sockets``).
* **Scheduling**: no real-time class and no priority raised above the one it started with
  (``RLIMIT_RTPRIO`` and ``RLIMIT_NICE`` at 0, whatever the host grants its user).
* **Out of memory**: the process that starts a runner gives it a high ``oom_score_adj`` first
  (``OOM_SCORE_ADJ``): the kernel's OOM killer takes a candidate's processes before a baseline's,
  and both before the judge; where aka holds ``CAP_SYS_RESOURCE`` the runner cannot lower it
  (elsewhere it can: no Landlock rule keeps the file from it and CUDA working, ``apply``).

What is applied is returned as a record (``confinement`` in the evaluation record). Whether a
partial confinement is acceptable is the caller's policy (``evaluation.confinement``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import os
import platform
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

SANDBOX_PROTECTED_ALWAYS = ("/tmp", "/var/tmp", "/dev/shm", "/root", "/home")
"""Folders a runner may never read, whatever its request allows (other processes' scratch)."""

# Syscall numbers are the same on x86_64 and aarch64 (generic table).
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE
READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
WRITE_RIGHTS = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG
                | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_SYM)

MAX_FILE_BYTES = 512 * 2**20
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_DUMPABLE = 4
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
LINUX_CAPABILITY_VERSION_3 = 0x20080522

# Read-only below these (when they exist); protected folders inside them are carved out.
SYSTEM_READ_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
                     "/opt", "/proc", "/sys", "/run/nvidia-persistenced")
# Device files a GPU runtime opens read-write.
DEVICE_GLOBS = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                "/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/nvidia-uvm*", "/dev/kfd",
                "/dev/dri/*")


OOM_SCORE_ADJ = {"candidate": 1000, "agent": 1000, "baseline": 500}
"""Where the kernel's OOM killer looks first (``oom_score_adj``: -1000 to 1000; the judge keeps
its own, normally 0). The killer takes the process with the most points: its pages, plus the score
in thousandths of the host's memory. A candidate that filled the host's memory from many small
processes would otherwise have it kill the largest one, its judge or the baseline's runner, and
so turn its own failure into an ``infra_error`` or a task's failure (a dropped sample, not a 0).
At 1000, any process of the candidate's outranks any other process short of the whole memory;
a baseline's (500) outranks the judge unless the judge is larger by half of the memory. An agent's
CLI is scored as a candidate: aka's own processes hold what the run has recorded."""

CAP_SYS_RESOURCE = 24


def oom_score_adj(side: str) -> int:
    """The OOM score of a side's runner or builder (``side``: "candidate", "baseline builder")."""
    return OOM_SCORE_ADJ["baseline" if side.split()[0] == "baseline" else "candidate"]


def set_oom_score_adj(pid: int | str, score: int) -> None:
    """Give a process aka started (``pid``, or "self" in a child before it execs), before it
    runs anything it was given, ``score`` for the OOM killer (best effort: the process's record,
    ``apply``, says what it got)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/oom_score_adj").write_text(str(score))


def _holds_capability(cap: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> cap & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _oom_record() -> str:
    """What the kernel's OOM killer makes of this process (read before its capabilities go)."""
    try:
        score = int(Path("/proc/self/oom_score_adj").read_text())
    except (OSError, ValueError):
        return "unknown (no /proc/self/oom_score_adj)"
    if score <= 0:
        return f"oom_score_adj {score} (unchanged)"
    if _holds_capability(CAP_SYS_RESOURCE):
        # Set by a writer holding the capability (its parent, before exec): that is also the
        # lowest score the process, without the capability from here on, may ever set.
        return f"oom_score_adj {score}, which it cannot lower"
    return f"oom_score_adj {score}; it could lower it (this host's aka lacks CAP_SYS_RESOURCE)"


class SandboxError(RuntimeError):
    """Confinement was required but this host cannot apply it."""


@attrs.frozen(kw_only=True)
class SandboxSpec:
    """What a runner may touch. Paths are absolute; the judge computes them."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    devices: tuple[str, ...] = ()
    allow_network: bool = False
    sockets: bool = False
    """Whether it may make and connect any socket. Without, it gets only the Unix stream and
    packet sockets the CUDA driver makes, and no connection (``seccomp``: a memory file queued on
    connected sockets of its own would be memory no watch sees, and Landlock does not govern
    ``connect`` to a host daemon's named socket): so are every runner, e2e engine and harness
    command of aka's. For an engine whose parts talk over sockets."""
    required: bool = True
    """Fail (rather than run unconfined) when Landlock or a network restriction is unavailable."""

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON values (what travels to the process it confines)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SandboxSpec:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


# --------------------------------------------------------------------------- syscalls

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.prctl.restype = ctypes.c_int
    return _libc


def _syscall(number: int, *args: Any) -> int:
    result = _lib().syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def landlock_abi() -> int:
    """The Landlock ABI version of this kernel; 0 when Landlock is absent or disabled."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    try:
        return _syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:
        return 0


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _handled_fs(abi: int) -> int:
    rights = READ_RIGHTS | WRITE_RIGHTS | FS_MAKE_CHAR | FS_MAKE_BLOCK
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    # IOCTL_DEV (ABI 5) is left unhandled: GPU drivers are driven by ioctls on their devices.
    return rights


def _add_path_rule(ruleset: int, path: str, rights: int, abi: int) -> bool:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS | (FS_TRUNCATE if abi >= 3 else 0)
        elif abi >= 2 and rights & FS_MAKE_REG:
            rights |= FS_REFER
        if abi >= 3 and rights & FS_WRITE_FILE:
            rights |= FS_TRUNCATE
        rule = _PathBeneath(allowed_access=rights, parent_fd=fd)
        _syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                 ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
        return True
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- the spec


def carve(roots: Iterable[str], protected: Iterable[str]) -> list[str]:
    """The folders below ``roots`` that contain none of ``protected``: each root itself when it
    holds no protected path, else its children, recursively, leaving the protected ones out."""
    prot = [os.path.realpath(p) for p in protected]
    out: list[str] = []

    def visit(path: str) -> None:
        real = os.path.realpath(path)
        if any(real == p or real.startswith(p.rstrip("/") + "/") for p in prot):
            return  # protected itself (or below a protected folder)
        inside = [p for p in prot if p.startswith(real.rstrip("/") + "/")]
        if not inside:
            out.append(real)
            return
        try:
            children = sorted(os.listdir(real))
        except OSError:
            return
        for child in children:
            visit(os.path.join(real, child))

    for root in roots:
        if os.path.exists(root):
            visit(root)
    return sorted(set(out))


def build_spec(*, scratch: Path, read: Sequence[str | Path], protected: Sequence[str | Path],
               required: bool = True, allow_network: bool = False,
               sockets: bool = False) -> SandboxSpec:
    """The spec of a runner: system folders, the Python installation and ``read`` (package
    folders, the side's code) readable; ``scratch`` writable; ``protected`` carved out of all."""
    prot = [os.path.realpath(str(p)) for p in protected]
    readable = carve(SYSTEM_READ_ROOTS, prot)
    # The Python installation and the explicitly needed folders (the side's code, aka's packages)
    # are allowed even below a protected folder (a Python under $HOME), less any protected
    # folder inside them.
    for path in (sys.prefix, sys.base_prefix, sys.exec_prefix, *map(str, read)):
        real = os.path.realpath(path)
        readable += carve([real], [p for p in prot if p.startswith(real.rstrip("/") + "/")])
    devices = sorted({path for pattern in DEVICE_GLOBS for path in glob.glob(pattern)})
    return SandboxSpec(read=tuple(sorted(set(readable))), write=(str(scratch),),
                       devices=tuple(devices), allow_network=allow_network, sockets=sockets,
                       required=required)


# --------------------------------------------------------------------------- applying it


def _drop_capabilities() -> str:
    if os.geteuid() != 0:
        return "unprivileged user"
    lib = _lib()
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    lib.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(last + 1):
        lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header = Header(LINUX_CAPABILITY_VERSION_3, 0)
    data = (Data * 2)()
    if lib.capset(ctypes.byref(header), data) != 0:
        raise SandboxError(f"capset failed: {os.strerror(ctypes.get_errno())}")
    return "all dropped (root without capabilities)"


def _new_network_namespace() -> str | None:
    """An empty network namespace (loopback down): no TCP, UDP or abstract sockets reach out."""
    lib = _lib()
    if lib.unshare(CLONE_NEWNET) == 0:
        return "namespace"
    uid, gid = os.getuid(), os.getgid()
    if lib.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return None
    try:  # map ourselves to ourselves, so file access is unchanged
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError:
        pass
    return "namespace (user namespace)"


def apply(spec: SandboxSpec) -> dict[str, Any]:
    """Confine this process (and everything it starts) by ``spec``; returns what was applied.

    Call it while the process has one thread and before any untrusted code runs.
    """
    record: dict[str, Any] = {"landlock_abi": 0, "filesystem": "unrestricted",
                              "network": "unrestricted", "capabilities": "unchanged",
                              "scoped": []}
    if not sys.platform.startswith("linux"):
        if spec.required:
            raise SandboxError(f"confinement needs Linux (this is {sys.platform})")
        record["confined"] = False
        return record
    lib = _lib()
    # Not dumpable: other processes of this user cannot attach to it or read its memory.
    lib.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    import resource

    # No core dumps, and no file (a log, a cache entry) larger than this: a flood kills the
    # runner (SIGXFSZ) instead of filling the disk. A limit of 1, not 0: where the host's
    # ``core_pattern`` pipes dumps to a helper (apport, systemd-coredump), the kernel ignores
    # the limit but for this one value, and would start that helper, outside the runner's
    # process group, at every crash a candidate provokes. The seccomp filter keeps it at 1.
    resource.setrlimit(resource.RLIMIT_CORE, (1, 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    record["max_file_bytes"] = MAX_FILE_BYTES
    # No real-time class and no priority above the one it started with, whatever the host's
    # limits grant its user: a runner on SCHED_FIFO, or at nice -20, would take the CPUs from the
    # judge and the other side's runner (its capabilities, CAP_SYS_NICE among them, go below).
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
    record["scheduling"] = "no real-time class, no raised priority"
    record["out_of_memory"] = _oom_record()
    if not spec.allow_network:
        net = _new_network_namespace()
        if net:
            record["network"] = net
    record["capabilities"] = _drop_capabilities()
    if lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxError(f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
    from aka_core.evaluation import seccomp

    record["other_processes"] = (seccomp.install(sockets=spec.sockets)
                                 or "unrestricted (no seccomp filter)")
    abi = landlock_abi()
    record["landlock_abi"] = abi
    if abi >= 1:
        attr = _RulesetAttr(handled_access_fs=_handled_fs(abi))
        size = 8
        if abi >= 4 and not spec.allow_network and record["network"] == "unrestricted":
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP  # no rule: all TCP denied
            record["network"] = "landlock (TCP bind and connect denied)"
            size = 16
        if abi >= 6:
            attr.scoped = SCOPE_SIGNAL | (0 if spec.allow_network else SCOPE_ABSTRACT_UNIX_SOCKET)
            record["scoped"] = ["signal"] + ([] if spec.allow_network else ["abstract_unix_socket"])
            size = 24
        ruleset = _syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
        try:
            # Listing folders (names only) is allowed everywhere: imports search sys.path
            # entries such as the repository root, whose files stay unreadable.
            _add_path_rule(ruleset, "/", FS_READ_DIR, abi)
            for path in spec.read:
                _add_path_rule(ruleset, path, READ_RIGHTS, abi)
            # The CUDA driver writes below /proc/<pid> of its own process (its own files only):
            # from driver 570 it names each thread it starts through task/<tid>/comm, and fails
            # (cudaErrorOperatingSystem) where it cannot. task/<tid>/oom_score_adj names the
            # process's OOM score, so no rule can give the one and keep the other: a runner may
            # lower its score unless CAP_SYS_RESOURCE set it (``OOM_SCORE_ADJ``).
            for path in (*spec.write, f"/proc/{os.getpid()}"):
                _add_path_rule(ruleset, path, READ_RIGHTS | WRITE_RIGHTS, abi)
            for path in spec.devices:
                _add_path_rule(ruleset, path, FS_READ_FILE | FS_WRITE_FILE, abi)
            _syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
        finally:
            os.close(ruleset)
        record["filesystem"] = "allowlist"
    network_ok = spec.allow_network or record["network"] != "unrestricted"
    record["confined"] = abi >= 1 and network_ok
    if spec.required and not record["confined"]:
        missing = []
        if abi < 1:
            missing.append("Landlock is not available (Linux 5.13+ with landlock in the LSM list)")
        if not network_ok:
            missing.append("no network namespace and no Landlock network rules (Linux 6.7+)")
        raise SandboxError("cannot confine the runner: " + "; ".join(missing))
    return record


def availability() -> dict[str, Any]:
    """What confinement this host offers (for ``aka smoke``), probed in a child process."""
    import json
    import subprocess

    code = ("import json, aka_core.evaluation.sandbox as s, os, tempfile\n"
            "d = tempfile.mkdtemp()\n"
            "spec = s.SandboxSpec(read=(), write=(d,), required=False)\n"
            "r = s.apply(spec)\n"
            "try:\n"
            "    open('/etc/hostname').read(); r['probe_read_outside'] = 'allowed'\n"
            "except OSError as e:\n"
            "    r['probe_read_outside'] = 'denied' if e.errno == %d else str(e)\n"
            "print(json.dumps(r))\n").replace("%d", str(errno.EACCES))
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError) as exc:
        return {"confined": False, "error": f"{type(exc).__name__}: {exc}"}
