"""A stand-in for ``aka_backend_e2e.engine_main`` in the builtin adapter's tests: the same pipe
protocol (confine, load, generate, stop), no torch, deterministic tokens, and faults chosen by
``$FAKE_ENGINE_MODE``:

    ok               serve as the protocol says
    crash            exit in the middle of a generate
    hang             stop answering in the middle of a generate
    garbage          write a line that is not JSON during a generate
    huge             write one enormous line during a generate
    extra            send one token more than max_tokens
    stranger         send a token for a request that was never sent
    short            say a request is done one token early
    fatal            report a kernel failure ({"ok":false,"fatal":true}) during a generate
    uncalled         leave rms_norm out of entrypoints_called
    build_error      the kernel tree "does not load"
    warmup_crash     the warm-up generate "fails" in a kernel
    bad_weights      the weights "do not match" their digest
    no_confine       the sandbox "cannot be applied"
    child            start a grandchild that sleeps (the adapter must kill the whole group)
    unlimited        serve every request it was sent at once (no slots: the judge's client is
                     the only limit), reading commands while it serves; log the most requests
                     it ever held (``max_outstanding=N`` on stderr)
    ahead            during the first request, send a token for ``req-4`` (which a client that
                     holds requests back has not sent yet)

After confining it probes the sandbox: it reads a file of the kernel tree (allowed) and
``$FAKE_ENGINE_PROBE`` (protected), and reports both in its load reply.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time

MODE = os.environ.get("FAKE_ENGINE_MODE", "ok")
ENTRYPOINTS = ["fused_add_rms_norm", "rms_norm", "rotary", "silu_and_mul"]


def reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def token(prompt: list[int], position: int) -> tuple[int, float]:
    value = int.from_bytes(hashlib.sha256(f"{prompt}:{position}".encode()).digest()[:8], "little")
    return value % 512, -((value >> 20) % 1000) / 1000.0


def probe(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        return "allowed"
    except PermissionError:
        return "denied"
    except OSError as exc:
        return f"error: {exc.strerror}"


def generate(requests: list[dict], served: list[int]) -> None:
    for req in requests:
        served[0] += 1
        count = req["max_tokens"] + (1 if MODE == "extra" else 0)
        for position in range(count):
            if MODE == "short" and position == req["max_tokens"] - 1:
                break
            if served[0] == 2 and position == 1:
                if MODE == "crash":
                    os._exit(9)
                if MODE == "hang":
                    time.sleep(3600)
                if MODE == "garbage":
                    sys.stdout.write("this is not json\n")
                    sys.stdout.flush()
                if MODE == "huge":
                    sys.stdout.write("x" * 5000)
                    sys.stdout.flush()
                    time.sleep(3600)
                if MODE == "fatal":
                    reply({"ok": False, "fatal": True, "error": "RuntimeError: kernel exploded"})
                    os._exit(1)
                if MODE == "stranger":
                    reply({"step": [["nobody", 1, -0.1]]})
            if MODE == "ahead" and served[0] == 1 and position == 0:
                reply({"step": [["req-4", 1, -0.1]]})
            tok, logprob = token(req["prompt"], position)
            reply({"step": [[req["id"], tok, logprob]]})
            time.sleep(0.001)
        reply({"done": req["id"]})
    reply({"idle": True, "steps": sum(r["max_tokens"] for r in requests)})


def serve_unlimited(stdin_lines: queue.Queue[dict | None]) -> None:
    """Every request sent is served at once, one token per request per step."""
    active: dict[str, list] = {}
    most = 0
    while True:
        block = not active
        while True:
            try:
                command = stdin_lines.get(block=block)
            except queue.Empty:
                break
            block = False
            if command is None or command["op"] == "stop":
                reply({"ok": True})
                return
            for req in command.get("requests", []):
                active[req["id"]] = [req, 0]
            most = max(most, len(active))
            print(f"max_outstanding={most}", file=sys.stderr, flush=True)
        step = []
        for rid, entry in list(active.items()):
            tok, logprob = token(entry[0]["prompt"], entry[1])
            step.append([rid, tok, logprob])
            entry[1] += 1
        reply({"step": step})
        for rid, entry in list(active.items()):
            if entry[1] >= entry[0]["max_tokens"]:
                del active[rid]
                reply({"done": rid})
        if not active:
            reply({"idle": True, "steps": 0})
        time.sleep(0.002)


def main() -> None:
    confine = json.loads(sys.stdin.readline())
    from aka_core.plugin import sandbox

    if MODE == "no_confine":
        reply({"ok": False, "event": "sandbox_failed", "error": "Landlock is not available"})
        return
    record = sandbox.apply(sandbox.SandboxSpec.from_json(confine["sandbox"]))
    reply({"ok": True, "confinement": record})
    if MODE == "child":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    load = json.loads(sys.stdin.readline())
    if MODE == "build_error":
        reply({"ok": False, "build_error": True, "error": "import failed: SyntaxError",
               "file": "norm.py", "line": 3})
        return
    if MODE == "warmup_crash":
        reply({"ok": False, "error": "warm-up failed: RuntimeError: boom",
               "traceback": "Traceback ..."})
        return
    if MODE == "bad_weights":
        reply({"ok": False, "error": "the weights' digest differs"})
        return
    called = [e for e in ENTRYPOINTS if not (MODE == "uncalled" and e == "rms_norm")]
    reply({"ok": True, "load_s": 0.01, "kernel_digest": "sha256:fake",
           "entrypoints_called": called, "load": load,
           "probe": {"kernels": probe(os.path.join(load["kernels"], "norm.py")),
                     "protected": probe(os.environ.get("FAKE_ENGINE_PROBE", "/nonexistent"))}})
    if MODE == "unlimited":
        lines: queue.Queue[dict | None] = queue.Queue()

        def read() -> None:
            for line in sys.stdin:
                lines.put(json.loads(line))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        serve_unlimited(lines)
        return
    served = [0]
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "stop":
            reply({"ok": True})
            return
        if command["op"] == "generate":
            generate(command["requests"], served)
        elif command["op"] == "check":
            reply({"ok": True, "outputs": [], "kernel": command["kernel"]})


if __name__ == "__main__":
    main()
