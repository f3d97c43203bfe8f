"""A seccomp filter that keeps a runner's hands off other processes' limits and scheduling.

Landlock scopes signals, tracing and memory reads to the runner's own domain, but a process of
the same user may still change another's resource limits (``prlimit``: a judge left 16 file
descriptors, or one second of CPU), its priority (``setpriority``, ``ioprio_set``) and its
scheduling (``sched_setaffinity`` onto one busy CPU, ``sched_setscheduler`` to ``SCHED_IDLE``).
The kernel refuses the scheduling calls only where the target holds capabilities the caller
lacks (a root judge, a runner that dropped them); for an ordinary user they pass, user namespace
or not. From a runner, they reach the judge, the other side's runner, and every other evaluation
of the host: slowed past its phase limits, that evaluation's candidate would be blamed.

The filter refuses them (``EPERM``) unless they name the runner itself (pid 0 or its own pid);
reading a limit stays allowed. It refuses System V IPC whole (``SYSV_IPC``), and the calls that
would let a runner hold the host's memory where the judge's memory watch cannot see it
(``HIDDEN_MEMORY``: ``io_uring``, whose registered files and socket operations bypass both the
descriptor table and this filter, secret memory files, POSIX message queues). A kernel's runner
cannot connect a socket (``sockets=False``, ``CONNECTIONS``): a memory file sent over a pair of
connected sockets of its own and closed is held by the socket's queue, in no process's size
and behind no descriptor. It may make only Unix stream and sequenced-packet sockets, which send
nothing until connected, and neither ``connect`` nor ``socketpair`` (nor a datagram socket,
which takes an address of its own when it sends with credentials). The CUDA driver makes two
such sockets while it starts: one asks for an MPS daemon (refused: there is none to use), the
other listens, offering its UVM descriptor to other processes (refusing ``listen`` fails the
driver's start in the sandbox: ``bench/cuda_socket_probe.py``). The one connected socket a
runner has is the one its judge gave it (``sides.RunnerProcess.unasked``). Calls of another
architecture's syscall table (32-bit ``int 0x80``, x32), which would pass a filter written for
this one's numbers, are refused too. So are keyrings, spliced pages and namespaces
(``KERNEL_OBJECTS``, ``NAMESPACES``): a key outlives the runner for a later evaluation to
read, a spliced page of a huge page holds all of it in a pipe, and a user namespace is where a
runner makes thousands of network namespaces, kernel memory in no process's size. ``clone3``,
whose flags a filter cannot read, is answered ``ENOSYS`` (the C library falls back to ``clone``).
A runner, and everything it starts, stays in the process group the judge started it in:
``setsid`` and ``setpgid`` are answered 0 and change nothing (``GROUPS``). A process that leaves
its group (a daemon in a session of its own) can be killed only by pid, pass after pass, which
one that forks a successor and exits every few microseconds outruns; a whole group is killed at
once (the kernel stops a fork in a group it is signalling), and none can leave it.
Its core-dump limit stays 1 (``CORE_LIMIT``): changing it is answered 0 and does nothing.
A thread of the runner's own named by its thread id is refused as well (a filter cannot tell it
from another process): thread pools bind their threads so only when asked (``OMP_PROC_BIND``,
``OMP_PLACES``), which the runners' environment leaves out.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_REFUSE = 0x00050000 | errno.EPERM
_NO_SUCH_CALL = 0x00050000 | errno.ENOSYS
_PRETEND = 0x00050000  # SECCOMP_RET_ERRNO with 0: the call returns 0 and does nothing
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_X32_BIT = 0x40000000

# struct seccomp_data: nr (u32), arch (u32), instruction pointer (u64), then six u64 arguments;
# the low 32 bits of argument i (what the kernel reads as a pid_t or an int) at 16 + 8 i.
_NR, _ARCH = 0, 4


def _arg(i: int, high: bool = False) -> int:
    return 16 + 8 * i + (4 if high else 0)


# (audit arch, syscall numbers) of the architectures aka runs on.
TABLES = {
    "x86_64": (0xC000003E, {"setpriority": 141, "ioprio_set": 251, "prlimit64": 302,
                            "sched_setparam": 142, "sched_setscheduler": 144,
                            "sched_setaffinity": 203, "sched_setattr": 314}),
    "aarch64": (0xC00000B7, {"setpriority": 140, "ioprio_set": 30, "prlimit64": 261,
                             "sched_setparam": 118, "sched_setscheduler": 119,
                             "sched_setaffinity": 122, "sched_setattr": 274}),
}
# System V IPC (shared memory, semaphores, message queues): refused whole.
SYSV_IPC = {
    "x86_64": (29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220),
    "aarch64": tuple(range(186, 198)),
}
"""A System V shared memory segment outlives every process that made or mapped it: written,
detached and left, it holds the host's memory where no process's size shows it, and no OOM
kill frees it, until the host reboots. Runners share the host's IPC namespace (a namespace of
their own needs ``CAP_SYS_ADMIN``), so they could also reach the segments, semaphores and
queues of every other process of the same user. Nothing a runner loads uses them (PyTorch,
Triton and the CUDA driver share memory through file descriptors)."""
HIDDEN_MEMORY = {
    # io_uring_setup, io_uring_enter, io_uring_register; memfd_secret; mq_open.
    "x86_64": (425, 426, 427, 447, 240),
    "aarch64": (425, 426, 427, 447, 180),
}
"""Calls that hold memory behind no descriptor or mapping of the runner's: files registered with
an ``io_uring`` and closed stay open in the ring (whose own operations also make sockets and
open files past this filter); a secret memory file's pages are in no file system the judge can
look at; a POSIX message queue outlives its process. Nothing a runner loads uses them."""
KERNEL_OBJECTS = {
    # add_key, request_key, keyctl; vmsplice, splice, tee; setns.
    "x86_64": (248, 249, 250, 278, 275, 276, 308),
    "aarch64": (217, 218, 219, 75, 76, 77, 268),
}
"""Calls that make what outlives the runner or hides memory in the kernel: a key in the user's
keyring (a note a later evaluation of the same user reads back, up to the user's quota), pages
spliced into a pipe (one 4 KiB page of a transparent huge page holds its whole 2 MiB: 3 GiB
behind six descriptors), another process's namespaces. Nothing a runner loads uses them."""
GROUPS = {"x86_64": (109, 112), "aarch64": (154, 157)}  # setpgid, setsid
"""Calls that move a process to another process group or session: answered 0, doing nothing,
so that what a runner starts stays in the runner's group and dies with it (``os.killpg``: the
kernel signals a group whole and cancels a fork in it that the signal overtakes; by pid, a
process that hops from pid to pid outruns every pass: ``hop_past_the_kill``). Pretended rather
than refused: tools put their children in groups of their own (``start_new_session``, ninja's
``POSIX_SPAWN_SETPGROUP``) and would fail on an error; they lose only their own job control."""
SETRLIMIT = {"x86_64": 160, "aarch64": 164}
RLIMIT_CORE = 4
CORE_LIMIT = 1
"""A runner's core-dump limit (``sandbox.apply``): 1, the one value at which the kernel skips a
dump piped to the host's helper (``core_pattern`` starting with ``|``: apport,
systemd-coredump), which would otherwise run outside the runner's process group, taking CPU
and disk beside other evaluations at every crash. Lowering a limit needs no privilege, so
``setrlimit`` and ``prlimit64`` of ``RLIMIT_CORE`` are answered 0 and do nothing (tools that turn
their dumps off, ``ulimit -c 0``, go on: they get none)."""
NAMESPACES = 0x7E020000
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: a runner makes no namespace
(each network namespace is ~190 KiB of kernel memory in no process's size, and a user namespace
is where the others are made without privileges). ``CLONE_NEWTIME`` (0x80) is refused by
``unshare`` only: in ``clone``'s flags those bits are the exit signal."""
CLONE_NEWTIME = 0x80
CLONES = {"x86_64": {"clone": 56, "unshare": 272, "clone3": 435},
          "aarch64": {"clone": 220, "unshare": 97, "clone3": 435}}
"""``clone3`` passes its flags in memory a filter cannot read: it is answered ``ENOSYS``, and the
C library (threads, ``posix_spawn``) falls back to ``clone``, whose flags it reads."""
SOCKET = {"x86_64": 41, "aarch64": 198}
CONNECTIONS = {"x86_64": {"socketpair": 53, "connect": 42},
               "aarch64": {"socketpair": 199, "connect": 203}}
"""Refused to a kernel's runner (``program``'s ``sockets``), as ``socket`` but for a Unix
stream or sequenced-packet socket (``UNIX_TYPES``). Without ``connect`` a runner also reaches
no daemon's named socket, which Landlock does not govern."""
AF_UNIX = 1
UNIX_TYPES = (1, 5)  # SOCK_STREAM, SOCK_SEQPACKET (the type's low bits; the rest are flags)
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
SCHEDULING = ("sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr")
"""Calls whose first argument names the process (or thread) they change."""
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1


def program(machine: str, own_pid: int, sockets: bool = True) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` as (code, jump if true, jump if false, k) instructions;
    KeyError for a machine without a table. ``sockets``: whether any socket may be made and
    connected (``SandboxSpec.sockets``); else only ``UNIX_TYPES`` of ``AF_UNIX``, and no
    ``CONNECTIONS`` call."""
    arch, nr = TABLES[machine]
    labels: dict[str, int] = {}
    code: list[tuple[int, str | int, str | int, int]] = []

    def op(c: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        code.append((c, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(code)

    op(_LD_ABS, _ARCH)
    op(_JEQ, arch, 0, "refuse")
    op(_LD_ABS, _NR)
    if machine == "x86_64":
        op(_JGE, _X32_BIT, "refuse", 0)
    op(_JEQ, nr["prlimit64"], "prlimit", 0)
    op(_JEQ, SETRLIMIT[machine], "setrlimit", 0)
    op(_JEQ, nr["setpriority"], "setpriority", 0)
    op(_JEQ, nr["ioprio_set"], "ioprio", 0)
    for name in SCHEDULING:
        op(_JEQ, nr[name], "pid", 0)
    refused = [*SYSV_IPC[machine], *HIDDEN_MEMORY[machine], *KERNEL_OBJECTS[machine],
               *(() if sockets else CONNECTIONS[machine].values())]
    for number in refused:
        op(_JEQ, number, "refuse", 0)
    for number in GROUPS[machine]:
        op(_JEQ, number, "pretend", 0)
    clones = CLONES[machine]
    op(_JEQ, clones["clone"], "clone", 0)
    op(_JEQ, clones["unshare"], "unshare", 0)
    op(_JEQ, clones["clone3"], "no_such_call", 0)
    if not sockets:
        op(_JEQ, SOCKET[machine], "socket", 0)
    op(_RET, _ALLOW)
    # clone(flags, ...) and unshare(flags): no namespace.
    label("unshare")
    op(_LD_ABS, _arg(0))
    op(_AND, NAMESPACES | CLONE_NEWTIME)
    op(_JEQ, 0, "allow", "refuse")
    label("clone")
    op(_LD_ABS, _arg(0))
    op(_AND, NAMESPACES)
    op(_JEQ, 0, "allow", "refuse")
    label("no_such_call")
    op(_RET, _NO_SUCH_CALL)
    if not sockets:
        # socket(family, type, protocol): a Unix stream or sequenced-packet socket only.
        label("socket")
        op(_LD_ABS, _arg(0))
        op(_JEQ, AF_UNIX, 0, "refuse")
        op(_LD_ABS, _arg(1))
        op(_AND, 0xF)
        for kind in UNIX_TYPES[:-1]:
            op(_JEQ, kind, "allow", 0)
        op(_JEQ, UNIX_TYPES[-1], "allow", "refuse")
    # sched_set*(pid, ...): itself.
    label("pid")
    op(_LD_ABS, _arg(0))
    op(_JEQ, 0, "allow", 0)
    op(_JEQ, own_pid, "allow", "refuse")
    # setrlimit(resource, limits): any but the core-dump limit.
    label("setrlimit")
    op(_LD_ABS, _arg(0))
    op(_JEQ, RLIMIT_CORE, "pretend", "allow")
    # prlimit64(pid, resource, new, old): only reading (new == NULL), or itself, and never the
    # core-dump limit.
    label("prlimit")
    op(_LD_ABS, _arg(2))
    op(_JEQ, 0, 0, "prlimit_write")
    op(_LD_ABS, _arg(2, high=True))
    op(_JEQ, 0, "allow", 0)
    label("prlimit_write")
    op(_LD_ABS, _arg(1))
    op(_JEQ, RLIMIT_CORE, "pretend", 0)
    op(_LD_ABS, _arg(0))
    op(_JEQ, 0, "allow", 0)
    op(_JEQ, own_pid, "allow", "refuse")
    # setpriority(which, who, prio) and ioprio_set(which, who, prio): one process, itself.
    label("setpriority")
    op(_LD_ABS, _arg(0))
    op(_JEQ, PRIO_PROCESS, "who", "refuse")
    label("ioprio")
    op(_LD_ABS, _arg(0))
    op(_JEQ, IOPRIO_WHO_PROCESS, "who", "refuse")
    label("who")
    op(_LD_ABS, _arg(1))
    op(_JEQ, 0, "allow", 0)
    op(_JEQ, own_pid, "allow", "refuse")
    label("pretend")  # last but two: BPF jumps only forward
    op(_RET, _PRETEND)
    label("allow")
    op(_RET, _ALLOW)
    label("refuse")
    op(_RET, _REFUSE)

    def offset(at: int, target: str | int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - at - 1
        assert 0 <= jump < 256, (target, jump)
        return jump

    return [(c, offset(i, jt), offset(i, jf), k) for i, (c, jt, jf, k) in enumerate(code)]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(own_pid: int | None = None, sockets: bool = True) -> str | None:
    """Install the filter on this thread (and everything it starts); it needs ``no_new_privs``.
    Returns what it refuses, or None where this machine has no table or the kernel refused."""
    machine = platform.machine()
    if machine not in TABLES:
        return None
    instructions = program(machine, os.getpid() if own_pid is None else own_pid, sockets)
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    prog = _Fprog(len(instructions), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return None
    return ("seccomp: other processes' resource limits, priorities and scheduling refused; "
            "System V IPC, io_uring, secret memory and message queues refused; "
            + ("" if sockets else "connections, socket pairs and sockets but Unix streams refused; ")
            + "other architectures' syscalls refused; "
            "no leaving its process group (setsid, setpgid do nothing); "
            "its core-dump limit kept at 1 (no dump, none piped to the host's helper)")
