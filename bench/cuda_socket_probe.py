"""What the CUDA driver asks of sockets while it starts, and which refusals it survives.

1. Where a C compiler is installed: a shim preloaded into ``torch.ones(..., device="cuda")``
   logs every ``socket``, ``socketpair``, ``connect``, ``bind``, ``listen`` and ``sendmsg`` the
   process makes (family, type, path).
2. CUDA started in a runner's own sandbox (``sandbox.apply``), and in an e2e engine's (sockets
   allowed), traced by the shim where it built.
3. For each variant of a seccomp filter (each refusing some socket calls with ``EPERM``), a child
   installs it, then starts CUDA through PyTorch, allocates and exports an arena as a runner does
   (``cuda_ipc``), and says whether each worked.

Use (on a GPU machine): ``python bench/cuda_socket_probe.py``; prints one JSON line per part.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
static void say(const char *what, int a, int b, const char *path) {
    FILE *f = fopen(getenv("SOCKET_LOG"), "a");
    if (f) { fprintf(f, "%s %d %d %s\n", what, a, b, path ? path : ""); fclose(f); }
}
static const char *path_of(const struct sockaddr *addr, socklen_t len) {
    static char out[120];
    if (!addr || addr->sa_family != AF_UNIX || len <= sizeof(sa_family_t)) return "";
    const struct sockaddr_un *un = (const void *)addr;
    size_t n = len - sizeof(sa_family_t); if (n > 100) n = 100;
    memcpy(out, un->sun_path, n); out[n] = 0;
    if (out[0] == 0) { out[0] = '@'; }
    return out;
}
int socket(int d, int t, int p) { say("socket", d, t, 0);
  return ((int (*)(int, int, int))dlsym(RTLD_NEXT, "socket"))(d, t, p); }
int socketpair(int d, int t, int p, int sv[2]) { say("socketpair", d, t, 0);
  return ((int (*)(int, int, int, int *))dlsym(RTLD_NEXT, "socketpair"))(d, t, p, sv); }
int connect(int s, const struct sockaddr *a, socklen_t l) {
  say("connect", s, a ? a->sa_family : -1, path_of(a, l));
  return ((int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect"))(s, a, l); }
int bind(int s, const struct sockaddr *a, socklen_t l) {
  say("bind", s, a ? a->sa_family : -1, path_of(a, l));
  return ((int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind"))(s, a, l); }
int listen(int s, int b) { say("listen", s, b, 0);
  return ((int (*)(int, int))dlsym(RTLD_NEXT, "listen"))(s, b); }
ssize_t sendmsg(int s, const struct msghdr *m, int f) { say("sendmsg", s, m && m->msg_controllen ? 1 : 0, 0);
  return ((ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg"))(s, m, f); }
"""

CUDA_WORK = textwrap.dedent("""
    import json, os, sys
    out = {}
    try:
        import torch
        out["tensor"] = float(torch.ones(1 << 20, device="cuda").sum())
        from aka_core.evaluation import cuda_ipc
        arena = cuda_ipc.Arena(1 << 22)
        fd = arena.export_fd()
        os.close(fd)
        out["export"] = "ok"
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    print(json.dumps(out))
""")

# (name, [(x86_64 syscall number, first argument or None)]) refused with EPERM.
VARIANTS = {
    "none": [],
    "socket": [(41, None)],
    "socketpair": [(53, None)],
    "socket AF_UNIX": [(41, 1)],
    "socket AF_NETLINK": [(41, 16)],
    "socket AF_INET": [(41, 2)],
    "socket AF_INET6": [(41, 10)],
    "connect": [(42, None)],
    "bind": [(49, None)],
    "listen": [(50, None)],
    "sendmsg": [(46, None)],
    "io_uring, memfd_secret, mq_open": [(425, None), (426, None), (427, None), (447, None),
                                        (240, None)],
}

CHILD = textwrap.dedent("""
    import ctypes, json, os, struct, sys
    rules = json.loads(sys.argv[1])
    LD, JEQ, RET = 0x20, 0x15, 0x06
    code = [(LD, 0, 0, 4), (JEQ, 0, 1, 0xC000003E), (RET, 0, 0, 0x7FFF0000), (LD, 0, 0, 0)]
    for number, arg in rules:
        if arg is None:
            code += [(JEQ, 0, 1, number), (RET, 0, 0, 0x00050001)]
        else:  # nr == number and arg0 == arg: refuse; then reload nr
            code += [(JEQ, 0, 3, number), (LD, 0, 0, 16), (JEQ, 0, 1, arg),
                     (RET, 0, 0, 0x00050001), (LD, 0, 0, 0)]
    code.append((RET, 0, 0, 0x7FFF0000))
    raw = b"".join(struct.pack("=HBBI", *c) for c in code)
    buf = ctypes.create_string_buffer(raw, len(raw))
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    prog = Prog(len(code), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    assert libc.prctl(38, 1, None, 0, 0) == 0
    assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0, ctypes.get_errno()
    exec(sys.argv[2])
""")


def trace() -> dict[str, object]:
    compiler = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if compiler is None:
        return {"trace": "no C compiler"}
    folder = tempfile.mkdtemp(prefix="socket-probe-")
    source, log = os.path.join(folder, "shim.c"), os.path.join(folder, "log")
    shim = os.path.join(tempfile.gettempdir(), "socket-probe-shim.so")  # ``sandboxed``'s too
    with open(source, "w") as handle:
        handle.write(SHIM)
    made = subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", shim, source, "-ldl"],
                          capture_output=True, text=True)
    if made.returncode != 0:
        return {"trace": "shim did not build", "stderr": made.stderr[-500:]}
    run = subprocess.run([sys.executable, "-c", CUDA_WORK], capture_output=True, text=True,
                         env={**os.environ, "LD_PRELOAD": shim, "SOCKET_LOG": log}, timeout=120)
    calls = []
    if os.path.exists(log):
        with open(log) as handle:
            calls = handle.read().splitlines()
    return {"trace": calls[:60], "calls": len(calls), "result": run.stdout.strip()[-300:],
            "stderr": run.stderr.strip()[-300:]}


SANDBOXED = textwrap.dedent("""
    import json, platform, sys
    from pathlib import Path
    from aka_core.evaluation import sandbox, seccomp
    if sys.argv[4] != "null":  # a variant: these calls (name: number) refused instead
        seccomp.CONNECTIONS[platform.machine()] = json.loads(sys.argv[4])
    spec = sandbox.build_spec(scratch=Path(sys.argv[1]), read=[p for p in sys.path if p],
                              protected=[], required=False, sockets=sys.argv[2] == "sockets")
    print(sandbox.apply(spec)["other_processes"], file=sys.stderr)
    exec(sys.argv[3])
""")


def sandboxed(mode: str, connections: dict[str, int] | None = None) -> dict[str, object]:
    """CUDA started in a runner's own sandbox (``sockets``: as an e2e engine's), traced where
    the shim builds; ``connections``: the calls refused instead of ``seccomp.CONNECTIONS``."""
    scratch = tempfile.mkdtemp(prefix="socket-probe-scratch-")
    log = os.path.join(scratch, "log")
    env = dict(os.environ)
    shim = os.path.join(tempfile.gettempdir(), "socket-probe-shim.so")
    if os.path.exists(shim):
        env.update(LD_PRELOAD=shim, SOCKET_LOG=log)
    run = subprocess.run([sys.executable, "-c", SANDBOXED, scratch, mode, CUDA_WORK,
                          json.dumps(connections)],
                         capture_output=True, text=True, env=env, timeout=120, cwd=scratch)
    calls = []
    if os.path.exists(log):
        with open(log) as handle:
            calls = handle.read().splitlines()
    lines = run.stdout.strip().splitlines()
    return {"sandboxed": mode, "refused": connections, "result": lines[-1] if lines else None,
            "trace": calls[:20],
            "stderr": run.stderr.strip()[-400:]}


def main() -> None:
    print(json.dumps(trace()), flush=True)
    for mode in ("runner", "sockets"):
        print(json.dumps(sandboxed(mode)), flush=True)
    # Which refusals the driver survives in the sandbox (x86_64 numbers).
    for refused in ({"socketpair": 53}, {"socketpair": 53, "listen": 50},
                    {"socketpair": 53, "connect": 42, "accept": 43, "accept4": 288}):
        print(json.dumps(sandboxed("runner", refused)), flush=True)
    for name, rules in VARIANTS.items():
        run = subprocess.run([sys.executable, "-c", CHILD, json.dumps(rules), CUDA_WORK],
                             capture_output=True, text=True, timeout=120)
        lines = run.stdout.strip().splitlines()
        print(json.dumps({"refused": name, "result": lines[-1] if lines else None,
                          "stderr": run.stderr.strip()[-300:] if not lines else ""}), flush=True)


if __name__ == "__main__":
    main()
