"""The runners' seccomp filter, applied by ``sandbox.apply`` in a real child process: another
process's limits and priorities stay out of reach, the runner's own stay in it."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from aka_core.evaluation import seccomp

pytestmark = pytest.mark.skipif(platform.machine() not in seccomp.TABLES
                                or not sys.platform.startswith("linux"),
                                reason="no seccomp table for this machine")

CHILD = textwrap.dedent("""
    import json, os, platform, resource, subprocess, sys
    from pathlib import Path
    from aka_core.evaluation import sandbox, seccomp
    # A neighbour with no capabilities (as an ordinary user's judge has none): the kernel's own
    # check (``cap_safe_nice``) then lets scheduling calls on it through, even from a root child.
    helper = subprocess.Popen([sys.executable, "-c", "from aka_core.evaluation import sandbox; "
                               "sandbox._drop_capabilities(); print('ready', flush=True); "
                               "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert helper.stdout.readline().strip() == "ready"
    other = helper.pid
    if sys.argv[2] == "off":  # the control: the same sandbox without the filter
        seccomp.install = lambda own_pid=None, sockets=True: None
    spec = sandbox.build_spec(scratch=Path(sys.argv[1]), read=[p for p in sys.path if p],
                              protected=[], required=False, sockets=sys.argv[2] == "sockets")
    record = sandbox.apply(spec)
    parent = os.getppid()
    tried = {}
    def attempt(name, call):
        try:
            call()
            tried[name] = "done"
        except OSError as exc:
            tried[name] = exc.strerror
    # Each call on the parent asks for what it has already (a limit, a priority): where one
    # gets through, the test fails on its answer and the test run is left as it was.
    nofile = resource.prlimit(parent, resource.RLIMIT_NOFILE)
    nice = os.getpriority(os.PRIO_PROCESS, parent)
    attempt("prlimit_parent", lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE, nofile))
    attempt("prlimit_parent_cpu", lambda: resource.prlimit(
        parent, resource.RLIMIT_CPU, resource.prlimit(parent, resource.RLIMIT_CPU)))
    attempt("read_parent_limit", lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE))
    attempt("setpriority_parent", lambda: os.setpriority(os.PRIO_PROCESS, parent, nice))
    attempt("setpriority_user", lambda: os.setpriority(os.PRIO_USER, 0, nice))
    attempt("setpriority_group", lambda: os.setpriority(os.PRIO_PGRP, 0, nice))
    cpus = os.sched_getaffinity(parent)
    attempt("setaffinity_parent", lambda: os.sched_setaffinity(parent, cpus))
    attempt("setscheduler_parent", lambda: os.sched_setscheduler(
        parent, os.sched_getscheduler(parent), os.sched_param(0)))
    attempt("setparam_parent", lambda: os.sched_setparam(parent, os.sched_param(0)))
    attempt("setaffinity_other", lambda: os.sched_setaffinity(other, os.sched_getaffinity(other)))
    attempt("setscheduler_other", lambda: os.sched_setscheduler(
        other, os.sched_getscheduler(other), os.sched_param(0)))
    attempt("setpriority_other", lambda: os.setpriority(
        os.PRIO_PROCESS, other, os.getpriority(os.PRIO_PROCESS, other)))
    attempt("prlimit_other", lambda: resource.prlimit(
        other, resource.RLIMIT_NOFILE, resource.prlimit(other, resource.RLIMIT_NOFILE)))
    attempt("own_affinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
    attempt("own_affinity_by_pid", lambda: os.sched_setaffinity(os.getpid(), os.sched_getaffinity(0)))
    attempt("own_scheduler", lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)))
    import threading
    threads = []
    def pool():  # OpenMP-style: PyTorch's CPU threads still start and run
        threads.append(sum(range(1000)))
    workers = [threading.Thread(target=pool) for _ in range(4)]
    [w.start() for w in workers]
    [w.join() for w in workers]
    tried["threads"] = "done" if len(threads) == 4 else "failed"
    attempt("own_limit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    attempt("own_limit_by_pid", lambda: resource.prlimit(
        os.getpid(), resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)))
    attempt("own_priority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))
    attempt("own_priority_by_pid", lambda: os.setpriority(os.PRIO_PROCESS, os.getpid(), 6))
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def shared_segment():  # made, then removed at once: a test leaves nothing behind
        made = libc.shmget(0, 1 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        if made < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        libc.shmctl(made, 0, None)  # IPC_RMID
    attempt("sysv_shared_memory", shared_segment)
    libc.syscall.restype = ctypes.c_long
    def raw(number, *args):  # a syscall's descriptor, closed at once
        fd = libc.syscall(ctypes.c_long(number), *args)
        if fd < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        os.close(fd)
    table = seccomp.HIDDEN_MEMORY[platform.machine()]
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    attempt("io_uring", lambda: raw(table[0], ctypes.c_uint(4), params))
    attempt("secret_memory", lambda: raw(table[3], ctypes.c_uint(0)))
    def message_queue():  # made, then removed at once
        name = f"aka-test-{os.getpid()}".encode()  # the raw call takes no leading slash
        raw(table[4], name, ctypes.c_int(os.O_CREAT | os.O_RDWR), ctypes.c_int(0o600), None)
        libc.mq_unlink(b"/" + name)
    attempt("message_queue", message_queue)
    import socket
    def unix_pair():
        for end in socket.socketpair():
            end.close()
    attempt("unix_socket_pair", unix_pair)
    attempt("unix_stream_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    attempt("unix_packet_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).close())
    attempt("unix_datagram_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close())
    def listener():  # the CUDA driver's (its UVM descriptor's): an abstract name, then listen
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as server:
            server.bind(f"\\0aka-test-{os.getpid()}")
            server.listen(1)
    attempt("listen", listener)
    def connect_own():  # a pair of connected sockets without socketpair: own listener, a client
        name = f"\\0aka-pair-{os.getpid()}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(name)
            server.listen(1)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(name)
    attempt("connect_own_listener", connect_own)
    attempt("inet_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
    attempt("netlink_socket", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close())
    def in_a_child(call):  # a namespace made in a child of its own leaves this process as it was
        pid = os.fork()
        if pid == 0:
            os._exit(0 if call() == 0 else ctypes.get_errno() or 255)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if code:
            raise OSError(code, os.strerror(code))
    attempt("user_namespace", lambda: in_a_child(lambda: libc.unshare(0x10000000)))
    attempt("network_namespace", lambda: in_a_child(lambda: libc.unshare(0x50000000)))  # user + net
    attempt("files_unshared", lambda: in_a_child(lambda: libc.unshare(0x400)))  # CLONE_FILES
    objects = seccomp.KERNEL_OBJECTS[platform.machine()]
    def keyring():  # a key in the user's keyring, removed at once (keyctl KEYCTL_UNLINK)
        key = libc.syscall(ctypes.c_long(objects[0]), b"user", f"aka-test-{os.getpid()}".encode(),
                           b"note", ctypes.c_size_t(4), ctypes.c_int(-4))
        if key < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        libc.syscall(ctypes.c_long(objects[2]), ctypes.c_int(9), ctypes.c_int(key), ctypes.c_int(-4))
    attempt("keyring", keyring)
    class Iov(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    page = ctypes.create_string_buffer(4096)
    def vmsplice():
        r, w = os.pipe()
        try:
            if libc.vmsplice(w, ctypes.byref(Iov(ctypes.addressof(page), 4096)), 1, 0) < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        finally:
            os.close(r), os.close(w)
    attempt("vmsplice", vmsplice)
    def splice():
        (r1, w1), (r2, w2) = os.pipe(), os.pipe()
        try:
            os.write(w1, b"x")
            os.splice(r1, w2, 1)
        finally:
            [os.close(fd) for fd in (r1, w1, r2, w2)]
    attempt("splice", splice)
    def clone3():
        if libc.syscall(ctypes.c_long(435), None, ctypes.c_size_t(0)) < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    attempt("clone3", clone3)
    attempt("subprocess", lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
    # Leaving the process group: a forked child's setsid, then setpgid, and a subprocess
    # started in a session of its own; each says whether it is still in this group.
    group = os.getpgid(0)
    def in_a_child_says(call, says):  # call() in a forked child, then says(), or the error
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                call()
                os.write(write, says().encode())
            except OSError as exc:
                os.write(write, exc.strerror.encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as reader:
            return reader.read().decode()
    def moved(call):
        return in_a_child_says(call, lambda: "left" if os.getpgid(0) != group else "stayed")
    tried["setsid"] = moved(os.setsid)
    tried["setpgid"] = moved(lambda: os.setpgid(0, 0))
    session = subprocess.run([sys.executable, "-c", "import os; print(os.getpgid(0))"],
                             start_new_session=True, capture_output=True, text=True)
    tried["new_session"] = ("left" if int(session.stdout) != group else "stayed"
                            ) if session.returncode == 0 else session.stderr[-200:]
    # Lowering the core-dump limit below 1, where a host's piped core_pattern would start its
    # helper at a crash: each way in a child of its own, which says the limit it then has.
    def core_limit_after(call):
        return in_a_child_says(
            call, lambda: "{} {}".format(*resource.getrlimit(resource.RLIMIT_CORE)))
    class Rlimit(ctypes.Structure):
        _fields_ = [("soft", ctypes.c_ulong), ("hard", ctypes.c_ulong)]
    def raw_setrlimit():  # the old call, which the C library no longer uses
        if libc.syscall(ctypes.c_long(seccomp.SETRLIMIT[platform.machine()]),
                        ctypes.c_int(resource.RLIMIT_CORE), ctypes.byref(Rlimit(0, 0))) < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    tried["core_limit"] = core_limit_after(lambda: None)
    tried["core_setrlimit"] = core_limit_after(
        lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    tried["core_soft_only"] = core_limit_after(
        lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 1)))
    tried["core_prlimit_by_pid"] = core_limit_after(
        lambda: resource.prlimit(os.getpid(), resource.RLIMIT_CORE, (0, 0)))
    tried["core_raw_setrlimit"] = core_limit_after(raw_setrlimit)
    helper.stdin.close()  # it ends (Landlock scopes signals: it cannot be killed from here)
    print(json.dumps({"record": record, "tried": tried}))
""")


def host_allows() -> dict[str, bool]:
    """Whether this test's own (unconfined) process may make each of what the filter adds."""
    import ctypes
    import socket

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    table = seccomp.HIDDEN_MEMORY[platform.machine()]
    name = f"aka-probe-{os.getpid()}".encode()  # the raw call takes no leading slash
    made = {"io_uring": libc.syscall(ctypes.c_long(table[0]), ctypes.c_uint(4),
                                     ctypes.create_string_buffer(120)),
            "secret_memory": libc.syscall(ctypes.c_long(table[3]), ctypes.c_uint(0)),
            "message_queue": libc.syscall(ctypes.c_long(table[4]), name,
                                          ctypes.c_int(os.O_CREAT | os.O_RDWR),
                                          ctypes.c_int(0o600), None)}
    for fd in made.values():
        if fd >= 0:
            os.close(fd)
    if made["message_queue"] >= 0:
        libc.mq_unlink(b"/" + name)
    works = {key: fd >= 0 for key, fd in made.items()}
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
        works["netlink_socket"] = True
    except OSError:
        works["netlink_socket"] = False
    for name, flag in (("user_namespace", 0x10000000), ("network_namespace", 0x50000000)):
        pid = os.fork()  # in a child: this process stays in its namespaces
        if pid == 0:
            os._exit(0 if libc.unshare(flag) == 0 else 1)
        works[name] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    objects = seccomp.KERNEL_OBJECTS[platform.machine()]
    key = libc.syscall(ctypes.c_long(objects[0]), b"user", f"aka-probe-{os.getpid()}".encode(),
                       b"note", ctypes.c_size_t(4), ctypes.c_int(-4))
    works["keyring"] = key >= 0
    if key >= 0:
        libc.syscall(ctypes.c_long(objects[2]), ctypes.c_int(9), ctypes.c_int(key),
                     ctypes.c_int(-4))
    return works


def attempts(folder: Path, mode: str, script: str = CHILD) -> dict[str, Any]:
    """What ``script`` (a confined child) reported as its last line of JSON."""
    out = subprocess.run([sys.executable, "-c", script, str(folder), mode], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_without_the_filter_a_confined_process_reaches_other_processes(tmp_path: Path) -> None:
    # What the filter is for: Landlock and the namespaces leave another process's limits and
    # scheduling open.
    report = attempts(tmp_path, "off")
    assert report["record"]["other_processes"].startswith("unrestricted")
    for name in ("prlimit_parent", "setaffinity_other", "setscheduler_other",
                 "setpriority_other", "prlimit_other", "sysv_shared_memory", "unix_socket_pair",
                 "unix_datagram_socket", "listen", "connect_own_listener", "inet_socket",
                 "vmsplice", "splice", "subprocess", "files_unshared"):
        assert report["tried"][name] == "done", (name, report)
    for name in ("setsid", "setpgid", "new_session"):
        assert report["tried"][name] == "left", (name, report["tried"][name])
    assert report["tried"]["core_limit"] == "1 1"
    for name in ("core_setrlimit", "core_prlimit_by_pid", "core_raw_setrlimit"):
        assert report["tried"][name] == "0 0", (name, report["tried"][name])
    assert report["tried"]["core_soft_only"] == "0 1"
    assert report["tried"]["clone3"] != "Function not implemented"  # EFAULT: no arguments
    # Each where the host itself allows it (a container's profile may refuse io_uring already,
    # a kernel may be built without secret memory); Landlock already refuses a message queue
    # (EACCES: its file system is one the runner may not write), the filter as well (EPERM).
    for name, works in host_allows().items():
        expected = "Permission denied" if name == "message_queue" else "done"
        assert not works or report["tried"][name] == expected, (name, report["tried"][name])


def test_a_confined_process_cannot_touch_its_parents_limits_or_priority(tmp_path: Path) -> None:
    limits = {r: resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_CPU)}
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    report = attempts(tmp_path, "on")
    assert report["record"]["other_processes"].startswith("seccomp:")
    tried = report["tried"]
    for name in ("prlimit_parent", "prlimit_parent_cpu", "setpriority_parent", "setpriority_user",
                 "setpriority_group", "setaffinity_parent", "setscheduler_parent",
                 "setparam_parent", "setaffinity_other", "setscheduler_other",
                 "setpriority_other", "prlimit_other", "sysv_shared_memory", "io_uring",
                 "secret_memory", "message_queue", "unix_socket_pair", "unix_datagram_socket",
                 "connect_own_listener", "inet_socket", "netlink_socket", "user_namespace",
                 "network_namespace", "keyring", "vmsplice", "splice"):
        assert tried[name] == "Operation not permitted", (name, tried)
    # clone3's flags are out of the filter's reach: the C library falls back to clone.
    assert tried["clone3"] == "Function not implemented"
    assert tried["subprocess"] == tried["files_unshared"] == "done"
    # What the CUDA driver does while it starts (``bench/cuda_socket_probe.py``): Unix stream
    # and packet sockets, one of them listening.
    for name in ("unix_stream_socket", "unix_packet_socket", "listen", "read_parent_limit",
                 "own_limit", "own_limit_by_pid", "own_priority", "own_priority_by_pid",
                 "own_affinity", "own_affinity_by_pid", "own_scheduler", "threads"):
        assert tried[name] == "done", (name, tried)
    # Nothing it starts leaves its process group, which the judge kills whole: setsid and
    # setpgid do nothing, and say they did (tools that start sessions of their own go on).
    for name in ("setsid", "setpgid", "new_session"):
        assert tried[name] == "stayed", (name, tried[name])
    # The core-dump limit stays 1 (no dump, none piped to the host's helper), whichever call
    # asks to lower it, and the call says it succeeded.
    for name in ("core_limit", "core_setrlimit", "core_soft_only", "core_prlimit_by_pid",
                 "core_raw_setrlimit"):
        assert tried[name] == "1 1", (name, tried[name])
    assert {r: resource.getrlimit(r) for r in limits} == limits
    assert os.getpriority(os.PRIO_PROCESS, 0) == nice


def test_a_spec_that_allows_sockets_gets_them_and_nothing_else(tmp_path: Path) -> None:
    # An e2e engine's processes (and a task's own commands) talk over sockets.
    tried = attempts(tmp_path, "sockets")["tried"]
    for name in ("unix_socket_pair", "unix_datagram_socket", "connect_own_listener",
                 "inet_socket"):
        assert tried[name] == "done", (name, tried)
    for name in ("prlimit_parent", "sysv_shared_memory", "io_uring", "secret_memory",
                 "message_queue"):
        assert tried[name] == "Operation not permitted", (name, tried)


def test_every_jump_of_the_filter_lands_inside_it() -> None:
    for machine in seccomp.TABLES:
        program = seccomp.program(machine, own_pid=4242)
        for at, (code, jt, jf, _k) in enumerate(program):
            if code == 0x06:  # a return
                continue
            assert at + 1 + max(jt, jf) < len(program)
        assert program[-1] == (0x06, 0, 0, 0x00050000 | 1)  # the last word refuses


FOREIGN = r"""
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
    long native = syscall(SYS_getpid);
    long legacy;  /* getpid through the 32-bit table: int 0x80, number 20 */
    __asm__ volatile ("int $0x80" : "=a"(legacy) : "a"(20L) : "memory");
    long x32;  /* getpid through the x32 table: 39 with bit 30 set */
    __asm__ volatile ("syscall" : "=a"(x32) : "a"(39L | 0x40000000L) : "rcx", "r11", "memory");
    printf("%ld %ld %ld\n", native, legacy, x32);
    return 0;
}
"""

FILTERED_EXEC = textwrap.dedent("""
    import ctypes, os, sys
    from aka_core.evaluation import sandbox, seccomp
    if sys.argv[2] == "on":
        assert ctypes.CDLL(None).prctl(sandbox.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
        assert seccomp.install() is not None
    os.execv(sys.argv[1], [sys.argv[1]])
""")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the 32-bit and x32 tables are x86's")
def test_syscalls_of_another_table_are_refused(tmp_path: Path) -> None:
    # A filter that reads syscall numbers of one table is blind to the same call made through
    # another (prlimit64 is 302 on x86_64, 340 through int 0x80): those are refused whole.
    compiler = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "foreign.c"
    source.write_text(FOREIGN)
    binary = tmp_path / "foreign"
    subprocess.run([compiler, "-O0", "-o", str(binary), str(source)], check=True, timeout=60)

    def run(mode: str) -> list[int]:
        out = subprocess.run([sys.executable, "-c", FILTERED_EXEC, str(binary), mode],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        return [int(v) for v in out.stdout.split()]

    pid, legacy, x32 = run("off")
    # The control: where this kernel runs 32-bit calls, the legacy getpid answers the pid
    # (else ENOSYS); x32 is built into few kernels (ENOSYS, -38, where it is not).
    assert legacy in (pid, -38) and x32 in (pid, -38)
    pid, legacy, x32 = run("on")
    assert pid > 0  # the native table still works
    assert (legacy, x32) == (-1, -1)  # -EPERM, from the filter


OWN_SCHEDULING = textwrap.dedent("""
    import json, os, resource, sys
    from pathlib import Path
    from aka_core.evaluation import sandbox
    # A host that grants this user a real-time priority and a raised nice value (limits.conf's
    # rtprio and nice, as audio setups do): set here, while the child may still raise them.
    try:
        resource.setrlimit(resource.RLIMIT_RTPRIO, (10, 10))
        resource.setrlimit(resource.RLIMIT_NICE, (30, 30))
    except ValueError:  # a container's root without CAP_SYS_RESOURCE
        print(json.dumps({"skip": "this root cannot raise its limits (no CAP_SYS_RESOURCE)"}))
        sys.exit(0)
    if sys.argv[2] == "off":  # the control: the same sandbox with the host's limits kept
        real = resource.setrlimit
        resource.setrlimit = lambda which, limits: (
            None if which in (resource.RLIMIT_RTPRIO, resource.RLIMIT_NICE)
            else real(which, limits))
    spec = sandbox.build_spec(scratch=Path(sys.argv[1]), read=[p for p in sys.path if p],
                              protected=[], required=False)
    record = sandbox.apply(spec)
    tried = {}
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        tried["fifo"] = "done"
    except OSError as exc:
        tried["fifo"] = exc.strerror
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before - 5)
        tried["raise_priority"] = "done"
    except OSError as exc:
        tried["raise_priority"] = exc.strerror
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before + 1)
        tried["lower_priority"] = "done"
    except OSError as exc:
        tried["lower_priority"] = exc.strerror
    print(json.dumps({"record": record, "tried": tried}))
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="raising the limits first needs root")
# (and CAP_SYS_RESOURCE, which a container's root may lack: so do the CI and H100 machines')
def test_a_confined_process_cannot_raise_its_own_scheduling(tmp_path: Path) -> None:
    # Without the limits, a runner granted them by the host takes SCHED_FIFO or nice -5 and
    # with them the CPUs of the judge and of the other side's runner.
    def run(mode: str) -> dict[str, Any]:
        report = attempts(tmp_path, mode, OWN_SCHEDULING)
        if "skip" in report:
            pytest.skip(report["skip"])
        return report

    control = run("off")
    assert control["tried"] == {"fifo": "done", "raise_priority": "done",
                                "lower_priority": "done"}, control
    confined = run("on")
    assert confined["record"]["scheduling"] == "no real-time class, no raised priority"
    assert confined["tried"] == {"fifo": "Operation not permitted",
                                 "raise_priority": "Permission denied",
                                 "lower_priority": "done"}, confined
