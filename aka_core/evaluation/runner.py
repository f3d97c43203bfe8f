"""A runner: the untrusted process that imports one side's code (baseline or candidate) and
executes calls on the judge's request.

Started by the judge as ``python -I -S -c <boot> CMD_FD REPLY_FD FD_SOCKET``. Its first command
carries the ``SandboxSpec``, applied before PyTorch or the side's code is imported. After that the
process is assumed hostile: the side's code can replace anything here, and the judge believes no
reply beyond what it can verify (tensors it reads itself, checked against the reference). So this
module holds no secret and decides nothing: it maps the input slots the judge gives it, calls the
side's function, and says where the outputs are.

Input slots live in an arena this runner allocates and hands to the judge as a file descriptor on
FD_SOCKET (the side's kernels then read their own memory: read through an IPC mapping, a gather
ran 11x slower on an H200); the judge maps it and writes each block's inputs into it. The
candidate's outputs are exported where its kernels wrote them; the baseline's are copied into an
output region of its arena (``setup``'s ``out``), so that no memory of the baseline is ever
reachable by a handle another process could guess. Timed blocks: on ``arm``, the runner enqueues
on its stream a wait for the judge's "go" word in the arena, then ``count`` calls (or one replay of
a captured CUDA graph of them), then a write of the "done" word, and answers at once (after the
block, the baseline copies the outputs of the calls the judge audits on ``copy_out``). An arena
may hold several *placements* of the slots (``per_placement`` slots each, at offsets the judge
chose), each with a graph of its own: ``arm`` names the one a block runs on. The
judge, whose clock this is, starts its timing event, copies the block's fresh inputs into the
arena, writes "go", waits for "done" and stops its event. After a case's pairs the baseline's
runner sets its arena and graph aside (``keep``) until the clean phase makes them current again
(``restore``): the baseline is timed alone on the memory it was timed on beside the candidate.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aka_core.evaluation import protocol

GO_OFFSET = 0
DONE_OFFSET = 4


def _factory(path: str) -> Any:
    """The backend factory named ``module:attr`` (an installed plugin's)."""
    module, _, attr = path.partition(":")
    factory: Any = importlib.import_module(module)
    for part in attr.split("."):
        factory = getattr(factory, part)
    return factory


class Runner:
    def __init__(self, cmd_fd: int, reply_fd: int, fd_socket: int):
        import socket

        self.commands = protocol.LineReader(cmd_fd, limit=2**31)
        self.reply_fd = reply_fd
        self.fd_socket = socket.socket(fileno=fd_socket)
        self.setups = 0
        self.out_region: tuple[int, int] = (0, 0)
        self.fn: Callable[..., Any] | None = None
        self.backend: Any = None
        self.device = "cpu"
        self.arena: Any = None
        self.slots: list[dict[str, Any]] = []
        self.per_placement = 0  # slots of one placement: ``slots`` holds each placement's in turn
        self.graphs: list[Any] = []  # one captured graph per placement
        self.graph_outputs: list[list[list[Any]]] = []  # per placement, per call
        self.kept: list[list[Any]] = []
        self.last_calls: list[list[Any]] = []
        self.exports: dict[int, bytes] = {}
        # Arenas and graphs set aside by ``keep`` until ``restore`` (the baseline's, per case).
        self.set_aside: dict[str, tuple[Any, ...]] = {}
        self.stream: Any = None
        self.started_op = time.monotonic()
        self.steps: dict[str, float] = {}
        self._last_step = self.started_op

    def step(self, name: str) -> None:
        """Diagnostics: the seconds since the last step (or the op's start) spent on ``name``."""
        now = time.monotonic()
        self.steps[name] = self.steps.get(name, 0.0) + now - self._last_step
        self._last_step = now

    def reply(self, **message: Any) -> None:
        steps = {k: round(v, 6) for k, v in self.steps.items()} or None
        protocol.send(self.reply_fd, {**message, "steps": steps,
                                      "busy_s": round(time.monotonic() - self.started_op, 6)})
        self.steps = {}

    # ------------------------------------------------------------------ start-up
    def start(self) -> None:
        # Two commands: "confine" (the sandbox), then "init" (the side). A runner started ahead
        # of its evaluation (``warm``) is confined, imports PyTorch, and waits for its side.
        confine = self.commands.read(timeout=24 * 3600)
        from aka_core.evaluation import sandbox

        spec = sandbox.SandboxSpec.from_json(confine["sandbox"])
        try:
            record = (sandbox.apply(spec) if confine.get("confine", True) else
                      {"confined": False, "reason": "switched off"})
        except sandbox.SandboxError as exc:
            self.reply(event="sandbox_failed", message=str(exc))
            sys.exit(3)
        self.reply(event="sandboxed", confinement=record)
        if confine.get("warm"):
            import torch  # confined already; no side code has run yet

            if confine.get("device") == "cuda":
                self.make_context()
            self.preload_ahead(confine.get("preload") or (), str(confine.get("device")),
                               confine.get("preload_cache"))
        init = self.commands.read(timeout=24 * 3600)
        if init.get("op") != "init":
            return
        # The backend's variables (e.g. TRITON_INTERPRET), before its module is imported.
        os.environ.update({str(k): str(v) for k, v in (init.get("env") or {}).items()})
        self.device = init["device"]
        self.backend = _factory(init["backend"])()
        import torch  # noqa: F401  (imported here, before the lock, not by the side's load)

        # The backend's own heavy imports (trusted code, nothing of the side), before the judge
        # holds the GPU: they would otherwise count in every evaluation's GPU-exclusive part.
        preload = getattr(self.backend, "preload", None)
        if callable(preload):
            # A failure here is not the side's: its load imports the same and reports there.
            # What it compiles for itself (Triton's driver utilities, a library it loads at
            # once) goes to a folder of its own: the side's cache is written by its builder,
            # side code that runs before the lock, and a library it put there would run here.
            with contextlib.suppress(Exception), _triton_cache(Path.cwd() / "preload"):
                preload(self.device)

        if self.device == "cuda":
            try:
                self.make_context()
            except Exception as exc:  # no side code has run: the host's fault, said as such
                self.reply(event="setup_failed", message=f"{type(exc).__name__}: {exc}"[:2000])
                sys.exit(3)
        # Ready: everything before the side's code is done (the judge takes the GPU lock only
        # once both runners say so, and a runner that dies before it is the host's fault).
        self.reply(event="ready")
        # Nothing of the side runs, and no work reaches the GPU, until the judge holds the GPU.
        load = self.commands.read(timeout=24 * 3600)
        if load.get("op") != "load":
            return
        from aka_core.errors import BuildError

        try:
            self.fn = self.backend.load_callable(Path(init["root"]), init["ref"], init["package"])
        except BuildError as exc:
            self.reply(event="build_failed", message=exc.message, file=exc.file, line=exc.line)
            return
        except BaseException as exc:
            self.reply(event="build_failed", message=f"{type(exc).__name__}: {exc}")
            return
        self.reply(event="loaded")
        self.serve()

    def preload_ahead(self, backends: Any, device: str, cache: Any) -> None:
        """A runner started ahead of its request (``warm``) preloads the backends its request may
        name (trusted code, no side's): a request then starts with them imported. Whatever they
        compile for themselves (Triton's driver utilities) goes to a folder of its own, not to
        the side's cache, which gets the side's stored kernels when the request comes (the
        backend's cache folder is read from the environment when used, not at import)."""
        if not backends or not cache:
            return
        with _triton_cache(Path(str(cache))):
            for path in backends:
                with contextlib.suppress(Exception):  # the request's own preload tries again
                    preload = getattr(_factory(str(path))(), "preload", None)
                    if callable(preload):
                        preload(device)

    def make_context(self) -> None:
        """This process's CUDA context and stream, made before the judge holds the GPU: nothing is
        launched (``torch.cuda.init()`` alone leaves the context to the first CUDA call, which
        was the side's load, under the lock: 0.2-0.3 s of every evaluation's GPU-exclusive
        part). Making a context allocates its memory and runs no kernel; the judge makes its
        own at the same point of its start-up."""
        import torch

        if self.stream is not None:
            return
        torch.cuda.init()
        torch.cuda.mem_get_info()  # the first driver call that needs the primary context
        self.stream = torch.cuda.Stream()

    def serve(self) -> None:
        while True:
            command = self.commands.read(timeout=24 * 3600)
            self.started_op = self._last_step = time.monotonic()
            op = command.get("op")
            if op == "quit":
                return
            handler = getattr(self, f"op_{op}", None)
            if handler is None:
                self.reply(ok=False, error=f"unknown op {op!r}")
                continue
            try:
                handler(command)
            except BaseException as exc:  # the side's own failure: reported, never fatal here
                self.reply(ok=False, error=f"{type(exc).__name__}: {exc}",
                           traceback="".join(traceback.format_exception(exc, limit=-8))[-3000:])
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    return

    # ------------------------------------------------------------------ inputs and outputs
    def _inputs(self, command: Mapping[str, Any]) -> dict[str, Any]:
        if "slot" in command:
            return self.slots[int(command["slot"])]
        return protocol.decode_inputs_cpu(command["inputs"])

    def _outputs(self, out: Any) -> list[dict[str, Any]]:
        tensors = _tensors(out)
        if self.device == "cpu":
            return [protocol.encode_cpu(t) for t in tensors]
        if self.out_region[1]:
            return self._copy_out(tensors, self.out_region[0])
        return [self._export(t) for t in tensors]

    def _copy_out(self, tensors: list[Any], start: int) -> list[dict[str, Any]]:
        """The baseline's outputs copied (on its stream) into its arena's output region, from
        ``start``: the judge reads them there, and nothing of the baseline is ever exported
        with a handle another process could guess."""
        import torch

        descs, offset = [], start
        end = self.out_region[0] + self.out_region[1]
        with torch.cuda.stream(self.stream):
            for t in tensors:
                offset = -(-offset // 256) * 256
                nbytes = t.numel() * t.element_size()
                if offset + nbytes > end:
                    raise ValueError(f"the outputs need more than the {self.out_region[1]} bytes "
                                     "the judge set aside for them")
                if nbytes:
                    target = self.arena.bytes[offset: offset + nbytes].view(t.dtype).view(t.shape)
                    target.copy_(t)
                descs.append({**protocol.describe(t), "strides": list(
                    protocol.contiguous_strides(t.shape)), "in_arena": True, "offset": offset})
                offset += nbytes
        return descs

    def _export(self, tensor: Any) -> dict[str, Any]:
        from aka_core.evaluation import cuda_ipc

        if tensor.device.type != "cuda":
            raise TypeError(f"an output is on {tensor.device}, expected the GPU")
        if tensor.numel() == 0:
            return {**protocol.describe(tensor), "handle": base64.b64encode(bytes(64)).decode(),
                    "offset": 0}
        base, _ = cuda_ipc.address_range(tensor.data_ptr())
        if base not in self.exports:
            self.exports[base] = cuda_ipc.export(tensor.data_ptr())
        return protocol.gpu_descriptor(tensor, self.exports[base], base)

    def _sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    # ------------------------------------------------------------------ operations
    def op_prepare(self, command: Mapping[str, Any]) -> None:
        from aka_core.errors import BuildError

        inputs = self._inputs(command)
        try:
            facts = self.backend.prepare(self.fn, inputs)
            self._sync()
        except BuildError as exc:
            self.reply(ok=False, build_error=True, error=exc.message, file=exc.file, line=exc.line)
            return
        self.reply(ok=True, facts=dict(facts) if isinstance(facts, Mapping) else None)

    def op_call(self, command: Mapping[str, Any]) -> None:
        import torch

        inputs = self._inputs(command)
        poison = int(command.get("poison_bytes", 0))
        if poison and self.device == "cuda":  # unwritten outputs then hold NaN, not stale values
            block = torch.empty(poison, dtype=torch.uint8, device="cuda")
            block.fill_(0xFF)
            del block
        self.step("poison")
        ops: set[str] | None = set() if command.get("profile") else None
        if ops is not None:
            with _OpRecorder(ops):
                out = self._call(inputs)
        else:
            out = self._call(inputs)
        self.step("call_profiled" if ops is not None else "call")
        self._sync()
        self.step("call_sync")
        self.kept = [[out]]
        after = None
        if self.device == "cpu":
            after = {name: protocol.encode_cpu(value) for name, value in inputs.items()
                     if isinstance(value, torch.Tensor)}
        outputs = self._outputs(out)
        self._sync()
        self.step("outputs")
        self.reply(ok=True, outputs=outputs, inputs_after=after,
                   ops=sorted(ops) if ops is not None else None)

    def _call(self, inputs: Mapping[str, Any]) -> Any:
        assert self.fn is not None
        if self.device == "cuda":
            import torch

            with torch.cuda.stream(self.stream):
                return self.fn(**inputs)
        return self.fn(**inputs)

    def op_setup(self, command: Mapping[str, Any]) -> None:
        """Allocate this runner's input arena (its own memory, so the side's kernels read local
        pages at full speed), export it to the judge, and make the input views of each slot."""
        import torch

        from aka_core.evaluation import cuda_ipc

        self.op_release({})
        self.step("release")
        # What the allocator only caches (the last captures' pools, the checks' outputs) goes
        # back to the GPU: the judge sizes the placements on the memory it sees free.
        torch.cuda.empty_cache()
        self.step("empty_cache")
        self.arena = cuda_ipc.Arena(int(command["nbytes"]))
        self.step("allocate")
        self.per_placement = int(command.get("per_placement") or len(command["slots"]))
        self.arena.bytes[:256].zero_()
        out = command.get("out") or [0, 0]
        self.out_region = (int(out[0]), int(out[1]))
        self.slots = []
        for slot in command["slots"]:
            views: dict[str, Any] = {}
            for name, item in slot.items():
                if "value" in item:
                    views[name] = item["value"]
                else:
                    views[name] = cuda_ipc.view(self.arena.bytes, int(item["offset"]),
                                                protocol.torch_dtype(item["dtype"]),
                                                tuple(item["shape"]), tuple(item["strides"]))
            self.slots.append(views)
        self.step("views")
        # Load the kernel of op_touch now: loading a module (lazily, at its first launch) while
        # this stream waits for the judge's "go" would wait for that stream, forever.
        with torch.cuda.stream(self.stream):
            self.arena.bytes[16:24].add_(0)
        torch.cuda.synchronize()
        self.step("sync")
        import socket

        self.setups += 1
        tag = f"arena-{self.setups}"
        fd = self.arena.export_fd()
        try:
            socket.send_fds(self.fd_socket, [tag.encode()], [fd])
        finally:
            os.close(fd)
        self.step("export")
        self.reply(ok=True, arena_fd=tag, nbytes=self.arena.nbytes)

    def op_capture(self, command: Mapping[str, Any]) -> None:
        """Capture, per placement, one CUDA graph of a call on each of its first ``count`` slots
        (each graph's outputs in a pool of its own), then replay each once, untimed: a graph's
        first launch uploads it, which no timed block should pay."""
        import torch

        count = int(command["count"])
        starts = range(0, len(self.slots), self.per_placement or len(self.slots) or 1)
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            for slot in self.slots[:count]:
                self.fn(**slot)  # type: ignore[misc]
        torch.cuda.synchronize()
        self.step("warm")
        graphs, calls = [], []
        for start in starts:
            graph = torch.cuda.CUDAGraph()
            outputs = []
            with torch.cuda.graph(graph, stream=self.stream):
                for slot in self.slots[start: start + count]:
                    outputs.append(self.fn(**slot))  # type: ignore[misc]
            graphs.append(graph)
            calls.append([_tensors(o) for o in outputs])
        torch.cuda.synchronize()
        self.step("capture")
        with torch.cuda.stream(self.stream):
            for graph in graphs:
                graph.replay()
        torch.cuda.synchronize()
        self.step("upload")
        self.graphs, self.graph_outputs = graphs, calls
        self.reply(ok=True, outputs=None if self.out_region[1] else [
            [[self._export(t) for t in call] for call in placed] for placed in calls])

    def op_arm(self, command: Mapping[str, Any]) -> None:
        """Enqueue a timed block behind the judge's "go" word; answer before it runs."""
        import torch

        from aka_core.evaluation import cuda_ipc

        n, count = int(command["n"]), int(command["count"])
        placement = int(command.get("placement", 0))
        stream = self.stream.cuda_stream
        self.kept = []
        cuda_ipc.stream_wait_at_least(stream, self.arena.ptr + GO_OFFSET, n)
        self.step("wait_go")
        outputs = None
        with torch.cuda.stream(self.stream):
            if command.get("graph"):
                self.graphs[placement].replay()
                calls = self.graph_outputs[placement]
            else:
                start = placement * self.per_placement
                self.kept = [self.fn(**slot)  # type: ignore[misc]
                             for slot in self.slots[start: start + count]]
                calls = [_tensors(o) for o in self.kept]
                if not self.out_region[1]:
                    outputs = [[self._export(t) for t in call] for call in calls]
        self.step("calls")
        cuda_ipc.stream_write(stream, self.arena.ptr + DONE_OFFSET, n)
        self.step("write_done")
        self.last_calls = calls
        self.reply(ok=True, outputs=outputs)

    def op_copy_out(self, command: Mapping[str, Any]) -> None:
        """The baseline, after a block: copy the outputs of the calls the judge audits into the
        output region. (Not behind "done" in the same stream: the GPU keeps a context running
        while it has work, so copies queued there would land inside the judge's window.)"""
        copies = [self._copy_out(self.last_calls[int(j)], int(start))
                  for j, start in command["copy"]]
        self.step("enqueue")
        self._sync()
        self.step("sync")
        self.reply(ok=True, copies=copies)

    def op_touch(self, command: Mapping[str, Any]) -> None:
        """A block with one trivial kernel: the judge's measure of a block's fixed cost."""
        import torch

        from aka_core.evaluation import cuda_ipc

        n = int(command["n"])
        stream = self.stream.cuda_stream
        cuda_ipc.stream_wait_at_least(stream, self.arena.ptr + GO_OFFSET, n)
        self.step("wait_go")
        with torch.cuda.stream(self.stream):
            self.arena.bytes[16:24].add_(0)
        self.step("kernel")
        cuda_ipc.stream_write(stream, self.arena.ptr + DONE_OFFSET, n)
        self.step("write_done")
        self.reply(ok=True)

    def op_wait(self, command: Mapping[str, Any]) -> None:
        self._sync()
        self.reply(ok=True)

    def op_keep(self, command: Mapping[str, Any]) -> None:
        """Set the current arena and graph aside under ``key``, neither freed nor changed (the
        judge times the baseline again on them after the candidate is gone: on an H100 a new
        placement in GPU memory alone moved a call's time by up to 7%, which the clean phase
        would otherwise read as the candidate's interference)."""
        self._sync()
        self.set_aside[str(command["key"])] = (self.arena, self.slots, self.per_placement,
                                               self.out_region, self.graphs, self.graph_outputs)
        self.arena, self.slots, self.per_placement, self.out_region = None, [], 0, (0, 0)
        self.graphs, self.graph_outputs = [], []
        self.kept, self.last_calls, self.exports = [], [], {}
        self.reply(ok=True)

    def op_restore(self, command: Mapping[str, Any]) -> None:
        """The arena and graph set aside under ``key`` current again (the current ones freed)."""
        aside = self.set_aside.pop(str(command["key"]))
        self.op_release({})
        (self.arena, self.slots, self.per_placement, self.out_region, self.graphs,
         self.graph_outputs) = aside
        self.reply(ok=True, nbytes=self.arena.nbytes if self.arena is not None else 0)

    def op_release(self, command: Mapping[str, Any]) -> None:
        self.out_region = (0, 0)
        self.last_calls = []
        self.graphs = []
        self.graph_outputs = []
        self.kept = []
        self.slots = []
        self.per_placement = 0
        self.exports = {}
        if self.arena is not None:
            self._sync()
            self.step("sync")
            self.arena.close()
            self.arena = None
            self.step("free")
        if command:
            self.reply(ok=True)


def _tensors(out: Any) -> list[Any]:
    import torch

    tensors = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(
        out, list | tuple) else None
    if tensors is None or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError(f"returned {type(out).__name__}; expected a tensor or a tuple of tensors")
    return tensors


class _OpRecorder:
    """Records the names of the PyTorch operators a call runs (advisory: see policy.py)."""

    def __init__(self, ops: set[str]):
        from torch.utils._python_dispatch import TorchDispatchMode

        recorded = ops

        class Mode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                # Otherwise the first call imports torch._dynamo to wrap the method below:
                # 2-3 s of the candidate's first recorded call, measured on the H200.
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                recorded.add(str(func.overloadpacket.__name__))
                return func(*args, **(kwargs or {}))

        self.mode = Mode()

    def __enter__(self) -> None:
        self.mode.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.mode.__exit__(*exc)


@contextlib.contextmanager
def _triton_cache(folder: Path) -> Iterator[None]:
    """Triton's cache in ``folder`` / triton while the block runs (it reads the variable when it
    compiles, not at import), then the side's again."""
    saved = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved


BOOT = ("import json, os, sys\n"
        "sys.path[:0] = json.loads(os.environ.pop('AKA_RUNNER_SYSPATH'))\n"
        "from aka_core.evaluation.runner import main\n"
        "main()\n")


def main() -> None:
    cmd_fd, reply_fd, fd_socket = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    for fd in (cmd_fd, reply_fd, fd_socket):
        os.set_inheritable(fd, False)
    Runner(cmd_fd, reply_fd, fd_socket).start()
