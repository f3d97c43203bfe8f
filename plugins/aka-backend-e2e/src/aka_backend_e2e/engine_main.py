"""The confined builtin engine process: ``python -I -m aka_backend_e2e.engine_main``.

It speaks JSON lines: commands on stdin, replies on stdout (the protocol's channel only:
everything else this process or the kernels print goes to stderr). Like the operator runner
(aka_core/evaluation/runner.py), the first command is ``confine`` with a ``SandboxSpec``, applied
while the process has one thread and before PyTorch or the kernel tree is imported::

    -> {"op":"confine","sandbox":{...SandboxSpec...},"confine":true}
    <- {"ok":true,"confinement":{...}}
    -> {"op":"load","model":"tiny","weights":"/w.safetensors","weights_digest":"sha256:..",
        "kernels":"/task/kernels","slots":8,"max_len":256,"device":"cuda","graph":true,
        "dtype":"bfloat16"}       (optional: dtype bfloat16|float32; cpu_threads, default 1)
    <- {"event":"importing_kernels"}   (settings and weights read: the tree's code runs next)
    <- {"ok":true,"load_s":..,"kernel_digest":"sha256:..","entrypoints_called":[..],...}
    -> {"op":"check","kernel":"rms_norm","args":[<tensor>|number, ...],"kwargs":{}}
    <- {"ok":true,"outputs":[<tensor>, ...]}
    -> {"op":"generate","requests":[{"id":"r0","prompt":[..],"max_tokens":16}, ...]}
                                   (optional "expect":{"more":n,"window":w}: a closed-loop
                                   client's promise, see engine.BuiltinEngine.expect)
    <- {"step":[[id, token, logprob], ...]}    per prefill and per decode step
    <- {"done":id}                             a request finished
    <- {"idle":true,"steps":n,"prefills":m}    every submitted request finished, none promised
    -> {"op":"stop"}
    <- {"ok":true}

A command that fails answers ``{"ok":false,"error":..}`` (and the process goes on); a kernel that
fails inside a generate answers ``{"ok":false,"fatal":true,"error":..}`` and the process exits 1.
Commands are read by a thread, so requests can arrive while the engine steps (they queue, and
free slots admit them). The judge owns the clock: it timestamps the lines it reads.
"""

from __future__ import annotations

import gc
import os
import queue
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from aka_core.plugin import protocol

MAX_COMMAND_BYTES = 256 * 2**20
PR_SET_CHILD_SUBREAPER = 36
MAX_REPLY_BYTES = 256 * 2**20
WAIT_FOREVER_S = 24 * 3600.0
IMPORTING = "importing_kernels"
"""The line the engine sends, during "load", before the kernel tree's code first runs."""


class _Stop(Exception):
    def __init__(self, code: int):
        self.code = code


class EngineServer:
    def __init__(self, reply_fd: int, command_fd: int = 0):
        self.reply_fd = reply_fd
        self.reader = protocol.LineReader(command_fd, limit=MAX_COMMAND_BYTES)
        self.commands: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.engine: Any = None
        self.kernels: Any = None
        self.device: Any = None

    def reply(self, message: dict[str, Any]) -> None:
        import json

        data = json.dumps(message, separators=(",", ":"))
        if len(data) > MAX_REPLY_BYTES:
            data = json.dumps({"ok": False, "error": f"a reply of {len(data)} bytes exceeds "
                                                     f"{MAX_REPLY_BYTES}"})
        view = memoryview((data + "\n").encode())
        while view:
            view = view[os.write(self.reply_fd, view):]

    # ------------------------------------------------------------------ start-up
    def run(self) -> int:
        try:
            first = self.reader.read(timeout=WAIT_FOREVER_S)
        except (protocol.ProtocolError, protocol.RunnerGone) as exc:
            self.reply({"ok": False, "error": f"no confine command: {exc}"})
            return 2
        if first.get("op") != "confine" or not isinstance(first.get("sandbox"), dict):
            self.reply({"ok": False, "error": "the first command must be "
                                              "{\"op\":\"confine\",\"sandbox\":{...}}"})
            return 2
        from aka_core.plugin import sandbox

        try:
            spec = sandbox.SandboxSpec.from_json(first["sandbox"])
            record = (sandbox.apply(spec) if first.get("confine", True) else
                      {"confined": False, "reason": "switched off"})
        except (sandbox.SandboxError, TypeError, ValueError) as exc:
            self.reply({"ok": False, "event": "sandbox_failed", "error": str(exc)})
            return 3
        self.reply({"ok": True, "confinement": record})
        threading.Thread(target=self._read_commands, name="commands", daemon=True).start()
        try:
            self._serve()
        except _Stop as stop:
            return stop.code
        return 0

    def _read_commands(self) -> None:
        while True:
            try:
                command = self.reader.read(timeout=WAIT_FOREVER_S)
            except protocol.RunnerGone as exc:
                if exc.timed_out:
                    continue
                self.commands.put(("eof", None))
                return
            except protocol.ProtocolError as exc:
                if len(self.reader.buffer) > self.reader.limit:
                    self.commands.put(("fatal", str(exc)))
                    return
                self.commands.put(("bad", str(exc)))
                continue
            self.commands.put(("command", command))

    # ------------------------------------------------------------------ the loop
    def _serve(self) -> None:
        while True:
            if self.engine is not None and self.engine.has_work and not self.engine.awaiting:
                try:
                    item = self.commands.get_nowait()
                except queue.Empty:
                    self._step()
                    continue
            else:
                item = self.commands.get()
            self._handle(*item)

    def _handle(self, kind: str, command: Any) -> None:
        if kind == "eof":
            raise _Stop(0)
        if kind == "fatal":
            self.reply({"ok": False, "fatal": True, "error": command})
            raise _Stop(2)
        if kind == "bad":
            self.reply({"ok": False, "error": command})
            return
        op = command.get("op")
        handler = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if handler is None:
            self.reply({"ok": False, "error": f"unknown op {op!r}; expected load, check, "
                                              "generate or stop"})
            return
        handler(command)

    def _step(self) -> None:
        try:
            self.engine.step(self.reply)
        except Exception as exc:  # the kernels' failure: reported, and this engine is done
            self.reply({"ok": False, "fatal": True, "error": f"{type(exc).__name__}: {exc}",
                        "traceback": _short_traceback(exc)})
            raise _Stop(1) from None
        if not self.engine.has_work and self.engine.promised == 0:
            self._idle()

    def _idle(self) -> None:
        """Every request is done and none is promised: say so, and settle the garbage (a wave
        of a closed loop that ends with every slot free is not the end: the client's next
        requests are on their way, and the run is still timed)."""
        self.reply({"idle": True, "steps": self.engine.decode_steps,
                    "prefills": self.engine.prefills})
        self.engine.decode_steps = self.engine.prefills = 0
        settle_garbage()

    # ------------------------------------------------------------------ operations
    def op_stop(self, command: dict[str, Any]) -> None:
        self.reply({"ok": True})
        raise _Stop(0)

    def op_load(self, command: dict[str, Any]) -> None:
        if self.engine is not None:
            self.reply({"ok": False, "error": "the engine is loaded already"})
            return
        started = time.monotonic()
        try:
            settings = _load_settings(command)
        except (KeyError, TypeError, ValueError) as exc:
            self.reply({"ok": False, "error": f"load: {exc}"})
            return
        import torch

        from aka_backend_e2e import engine as engine_module
        from aka_backend_e2e import kernels_api, model, weights
        from aka_core.plugin import AkaError, BuildError

        try:
            config = model.config_by_name(settings["model"])
            device = torch.device(settings["device"])
            if device.type == "cuda":
                torch.cuda.init()
            else:  # a tiny model's small tensors: more threads only contend
                torch.set_num_threads(settings["cpu_threads"])
            tensors, digest = weights.read_weights(Path(settings["weights"]),
                                                   settings["weights_digest"])
            model.check_weights(config, tensors, settings["weights"])
        except (weights.WeightsError, AkaError, OSError, RuntimeError) as exc:
            self.reply({"ok": False, "error": str(exc)})
            return
        # From here on the kernel tree's code runs (its import first): the judge takes every
        # failure after this line as the arm's, whatever a line the tree forged says.
        self.reply({"event": IMPORTING})
        try:
            kernels = kernels_api.load_tree(Path(settings["kernels"]))
        except BuildError as exc:
            self.reply({"ok": False, "build_error": True, "error": exc.message,
                        "file": exc.file, "line": exc.line})
            return
        called: set[str] = set()
        try:
            with torch.no_grad():
                engine = engine_module.BuiltinEngine(
                    config, tensors, kernels.recording(called), slots=settings["slots"],
                    max_len=settings["max_len"], device=device, dtype=settings["dtype"],
                    graph=settings["graph"])
                del tensors
                prompt_len = min(4, settings["max_len"] - 1)
                engine.generate([engine_module.Request(
                    id="warmup", prompt=tuple(range(1, prompt_len + 1)), max_tokens=2)])
            if device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:
            self.reply({"ok": False, "error": f"warm-up failed: {type(exc).__name__}: {exc}",
                        "traceback": _short_traceback(exc)})
            return
        engine.decode_steps = engine.prefills = 0
        self.engine, self.kernels, self.device = engine, kernels, device
        settle_garbage()
        self.reply({"ok": True, "load_s": round(time.monotonic() - started, 3),
                    "kernel_digest": kernels.digest, "weights_digest": digest,
                    "entrypoints_called": sorted(called), "graph": engine.graph is not None,
                    "device": str(device), "dtype": str(engine.dtype).removeprefix("torch."),
                    "slots": engine.slots, "max_len": engine.max_len})

    def op_check(self, command: dict[str, Any]) -> None:
        if self.engine is None:
            self.reply({"ok": False, "error": "check before load"})
            return
        import torch

        from aka_backend_e2e import kernels_api, tensors

        name, args, kwargs = command.get("kernel"), command.get("args"), command.get("kwargs")
        if name not in kernels_api.ENTRYPOINTS:
            self.reply({"ok": False, "error": f"unknown kernel {name!r}; expected one of "
                                              f"{', '.join(kernels_api.ENTRYPOINTS)}"})
            return
        if not isinstance(args, list) or not isinstance(kwargs, dict | None):
            self.reply({"ok": False, "error": "args must be a list and kwargs an object"})
            return
        try:
            decoded = [tensors.decode_value(a) for a in args]
            decoded_kw = {str(k): tensors.decode_value(v) for k, v in (kwargs or {}).items()}
        except tensors.TensorFormatError as exc:
            self.reply({"ok": False, "error": f"check: {exc}"})
            return
        decoded = [a.to(self.device) if isinstance(a, torch.Tensor) else a for a in decoded]
        decoded_kw = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v
                      for k, v in decoded_kw.items()}
        try:
            with torch.no_grad():
                outputs = kernels_api.call_for_check(self.kernels, name, decoded, decoded_kw)
                encoded = [tensors.encode_tensor(t) for t in outputs]
        except Exception as exc:
            self.reply({"ok": False, "error": f"{name} raised {type(exc).__name__}: {exc}",
                        "traceback": _short_traceback(exc)})
            return
        self.reply({"ok": True, "outputs": encoded})

    def op_generate(self, command: dict[str, Any]) -> None:
        if self.engine is None:
            self.reply({"ok": False, "error": "generate before load"})
            return
        from aka_backend_e2e.engine import Request, RequestError

        raw = command.get("requests")
        if not isinstance(raw, list):
            self.reply({"ok": False, "error": "generate: requests must be a list"})
            return
        expect = command.get("expect", {"more": 0, "window": 0})
        try:
            if not isinstance(expect, dict) or not all(
                    isinstance(expect.get(k), int) and not isinstance(expect.get(k), bool)
                    and expect[k] >= 0 for k in ("more", "window")):
                raise RequestError("expect must be {\"more\": n, \"window\": w}, integers "
                                   ">= 0")
            requests = [Request.from_json(r) for r in raw]
            self.engine.submit(requests)
            self.engine.expect(expect["more"], expect["window"])
        except RequestError as exc:
            self.reply({"ok": False, "error": f"generate: {exc}"})
            return
        if not self.engine.has_work and self.engine.promised == 0:
            self._idle()


def settle_garbage() -> None:
    """Collect now, while no request is in flight, and move every object that survives out of
    the collector's reach (``gc.freeze``): a later collection during a run scans only what the
    run allocated, instead of a full collection over PyTorch's and Triton's objects (tens of
    milliseconds) landing at a random step of a timed run. Called after the load and after
    every generate, once the idle line is written, so its cost is outside the judge's clock."""
    gc.collect()
    gc.freeze()


def _load_settings(command: dict[str, Any]) -> dict[str, Any]:
    def text(key: str) -> str:
        value = command[key]
        if not isinstance(value, str) or not value:
            raise ValueError(f"{key} must be a non-empty string")
        return value

    def count(key: str, low: int) -> int:
        value = command[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{key} must be an integer >= {low}")
        return value

    dtype_name = command.get("dtype", "bfloat16")
    if dtype_name not in ("bfloat16", "float32"):
        raise ValueError("dtype must be bfloat16 or float32")
    device = command.get("device", "cpu")
    if device not in ("cpu", "cuda"):
        raise ValueError("device must be cpu or cuda")
    import torch

    return {"model": text("model"), "weights": text("weights"),
            "weights_digest": text("weights_digest"), "kernels": text("kernels"),
            "slots": count("slots", 1), "max_len": count("max_len", 2),
            "cpu_threads": count("cpu_threads", 1) if "cpu_threads" in command else 1,
            "device": device,
            "graph": bool(command.get("graph", True)), "dtype": getattr(torch, dtype_name)}


def _short_traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc, limit=-8))[-3000:]


def supervise() -> None:
    """Split this process in two before anything of a kernel tree can run: the child returns and
    goes on as the engine; this process stays behind as its supervisor, a child subreaper that
    runs no code of the tree. A process the engine's tree leaves behind (a daemon that started
    a session of its own, out of reach of the judge's kill of the process group) becomes the
    supervisor's child instead of init's, so it stays in the tree below the process the judge
    started, which the judge freezes and kills when it stops the engine; and when the engine
    exits, the supervisor kills whatever is left below it. The engine confines itself after the
    split, so (Landlock ABI 6 and later) it cannot signal the supervisor."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return  # no subreaper here: the judge's kill of the tree is all there is
    engine = os.fork()
    if engine == 0:
        return
    # The supervisor holds none of the protocol's pipes: the judge sees their end when the
    # engine's tree is gone.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    code, engine_gone = 1, False
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == engine:
            code = os.waitstatus_to_exitcode(status)
            code, engine_gone = (code if code >= 0 else 128 - code), True
        if engine_gone:  # nothing of the engine's may outlive it
            _kill_below()
    os._exit(code)


def _kill_below() -> None:
    """Freeze then kill every process below this one (a frozen parent forks no new child)."""
    import signal

    from aka_core.plugin import signal_pids, signal_tree

    below = [pid for child in _children() for pid in signal_tree(child, signal.SIGSTOP)]
    signal_pids(below, signal.SIGKILL)


def _children() -> list[int]:
    from aka_core.plugin import children

    return children(os.getpid())


def main() -> None:
    supervise()
    # stdout is the protocol's channel only: keep its descriptor for replies, and point fd 1
    # (and sys.stdout) at stderr for everything else, prints of the kernels included.
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    code = EngineServer(reply_fd).run()
    sys.stderr.flush()
    # Skip interpreter teardown (CUDA graphs, the reader thread): the replies are written.
    os._exit(code)


if __name__ == "__main__":
    main()
