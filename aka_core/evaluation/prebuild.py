"""Builds before the GPU lock: a native side's library compiled by a process that has no GPU.

A CUDA (or HIP) side builds its library when its module is imported, in its runner, after the
judge took the GPU's lock: a fresh candidate's nvcc run (seconds to tens of seconds) would hold
the GPU and every evaluation queued behind it. So before the lock, for each side whose compiled
kernels were not restored from an earlier evaluation of the same files, the judge starts a
*builder*: a runner confined like the side's own, but with no GPU device in its sandbox and no
visible GPU, told to import the side in compile-only mode for this GPU's architecture, writing
into the side runner's private build cache (``AKA_BUILD_CACHE``). The build's content key (the
compiler, its command with the same ``-arch``, the sources) is the one the runner then computes,
so the runner finds the library built and only loads it.

Two kinds of backends build ahead (their ``build_ahead``): ``import`` (CUDA, HIP: importing the
side builds its library) and ``call`` (Triton: its JIT compiles at a kernel's first launch; the
builder calls the side's function once per case on ``meta`` tensors of the case's shapes, taken
from the inputs factory run under PyTorch's fake-tensor mode, so nothing touches the GPU before
the lock, with Triton's driver naming this GPU's target and launching nothing).

A builder's outcome changes nothing but where the build ran: a failure, a time-out or a
builder that cannot start is recorded and ignored, and the side's runner builds (and reports)
as it always did, under the lock. The builder runs the side's code (its module's import), so it
is the side's: confined the same way, able to write only its side's cache, killed afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aka_core.evaluation.failures import FailureKind
from aka_core.evaluation.sides import RunnerProcess, SideFailure
from aka_core.kits import native

# Environment variables that hide every GPU from a builder (its sandbox also leaves out the
# device files, where the host confines).
NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}


def gpu_architecture() -> str | None:
    """The visible GPU's architecture as the native backends name it (``sm_90``, ``gfx942``)."""
    import torch

    if not torch.cuda.is_available():
        return None
    if getattr(torch.version, "hip", None):
        name = str(getattr(torch.cuda.get_device_properties(0), "gcnArchName", "") or "")
        return name.split(":")[0] or None
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def builder_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A side runner's sandbox (JSON) without the GPU's device files."""
    gpu = ("/dev/nvidia", "/dev/kfd", "/dev/dri/")
    devices = [d for d in spec.get("devices", []) if not str(d).startswith(gpu)]
    return {**spec, "devices": devices}


class Builder:
    """One side's builder: started at once, collected with ``finish``."""

    def __init__(self, side: str, *, process: RunnerProcess, started: float, calls: int = 0,
                 shapes_unknown: int = 0, ahead: bool = False):
        self.side, self.process, self.started = side, process, started
        self.calls, self.shapes_unknown, self.ahead = calls, shapes_unknown, ahead

    @classmethod
    def start(cls, side: str, *, scratch: Path, runner_cache: Path, env: Mapping[str, str],
              spec: Mapping[str, Any], confine: bool, architecture: str,
              init: Mapping[str, Any], log_path: Path,
              calls: list[dict[str, Any]] | None = None, shapes_unknown: int = 0) -> Builder:
        """Start the builder of ``side``: confined by ``spec`` less the GPU, its scratch its own
        (``scratch``), its builds into ``runner_cache`` (the side runner's cache folder: its
        ``AKA_BUILD_CACHE`` and ``TRITON_CACHE_DIR`` below it); then one call of the side's
        function per entry of ``calls`` (inputs as ``protocol.encode_inputs_meta`` gives them)."""
        scratch.mkdir(parents=True, exist_ok=True)
        for sub in ("builds", "triton"):
            (runner_cache / sub).mkdir(parents=True, exist_ok=True)
        environment = {**env, **NO_GPU, native.COMPILE_ONLY_ENV: "1",
                       native.TARGET_ARCH_ENV: architecture,
                       "AKA_BUILD_CACHE": str(runner_cache / "builds"),
                       "TRITON_CACHE_DIR": str(runner_cache / "triton")}
        started = time.monotonic()
        process = RunnerProcess(f"{side} builder", scratch=scratch, env=environment,
                                log_path=log_path)
        own = builder_spec(spec)
        own["write"] = sorted({*own.get("write", []), str(runner_cache)})
        process.send(op="confine", sandbox=own, confine=confine)
        return cls._build(side, process, started, init, calls, shapes_unknown)

    @classmethod
    def adopt(cls, side: str, process: RunnerProcess, *, runner_cache: Path, architecture: str,
              init: Mapping[str, Any], calls: list[dict[str, Any]] | None = None,
              shapes_unknown: int = 0) -> Builder:
        """A builder started ahead (``warm``: confined, GPU hidden, waiting for its side) given
        the side: what ``start`` puts in a new builder's environment comes with its ``init``
        (applied before the backend is imported)."""
        for sub in ("builds", "triton"):
            (runner_cache / sub).mkdir(parents=True, exist_ok=True)
        env = {**dict(init.get("env") or {}), native.COMPILE_ONLY_ENV: "1",
               native.TARGET_ARCH_ENV: architecture,
               "AKA_BUILD_CACHE": str(runner_cache / "builds"),
               "TRITON_CACHE_DIR": str(runner_cache / "triton")}
        builder = cls._build(side, process, time.monotonic(), {**init, "env": env}, calls,
                             shapes_unknown)
        builder.ahead = True
        return builder

    @classmethod
    def _build(cls, side: str, process: RunnerProcess, started: float, init: Mapping[str, Any],
               calls: list[dict[str, Any]] | None, shapes_unknown: int) -> Builder:
        process.send(op="init", **{**init, "device": "cpu"})
        process.send(op="load")
        for inputs in calls or ():
            process.send(op="prepare", inputs=inputs)
        return cls(side, process=process, started=started, calls=len(calls or ()),
                   shapes_unknown=shapes_unknown)

    def finish(self, deadline: float) -> dict[str, Any]:
        """Wait for the build (until ``deadline``, monotonic), then kill the builder."""
        record: dict[str, Any] = {"ran": True, **({"started_ahead": True} if self.ahead else {})}
        try:
            reply = self.process.read(max(0.5, deadline - time.monotonic()), "start-up")
            if reply.get("event") != "sandboxed":
                record.update(outcome="not started", reason=str(reply.get("message") or reply)[:300])
            else:
                record["confined"] = bool((reply.get("confinement") or {}).get("confined"))
                reply = self.process.read(max(0.5, deadline - time.monotonic()), "building")
                if reply.get("event") == "ready":  # its imports done; the build comes next
                    reply = self.process.read(max(0.5, deadline - time.monotonic()), "building")
                event = reply.get("event")
                record["outcome"] = ("built" if event == "loaded" else
                                     "failed" if event == "build_failed" else "not started")
                if event != "loaded":
                    record["reason"] = str(reply.get("message") or reply)[:300]
                elif self.calls:
                    answers = [self.process.read(max(0.5, deadline - time.monotonic()), "compiling")
                               for _ in range(self.calls)]
                    failed = [a for a in answers if a.get("ok") is not True]
                    record.update(calls=self.calls, calls_failed=len(failed),
                                  shapes_unknown=self.shapes_unknown)
                    if failed:
                        record["reason"] = str(failed[0].get("error") or failed[0])[:300]
        except SideFailure as exc:
            record.update(outcome="timeout" if exc.kind == FailureKind.TIMEOUT else "failed",
                          reason=str(exc)[:300])
        finally:
            self.process.kill()
        record["seconds"] = round(time.monotonic() - self.started, 3)
        return record


def wanted(build_ahead: str | None, device: str, compile_only: bool,
           restored: Mapping[str, Any]) -> str | None:
    """Why a side gets no builder (None: it gets one). ``build_ahead``: the backend's kind."""
    if device != "cuda" or compile_only:
        return "no GPU lock to build before"
    if build_ahead not in ("import", "call"):
        return "the backend builds nothing ahead"
    if restored.get("used"):
        return "its compiled kernels were restored from an earlier evaluation of the same files"
    return None


def meta_inputs(make_inputs: Any, cases: Sequence[Any], seeds: Mapping[str, Sequence[int]],
                device: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Each case's inputs as shapes and dtypes (``protocol.encode_inputs_meta``), from the task's
    inputs factory run under PyTorch's fake-tensor mode: no memory is allocated and no kernel
    runs, on any device. A factory that needs its data (a size read from a tensor) gives none
    for that case; the names of those cases come second."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from aka_core.evaluation import protocol

    calls, skipped = [], []
    for case in cases:
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                inputs = make_inputs(dict(case.params), seeds[case.name][0], device)
            calls.append(protocol.encode_inputs_meta(inputs))
        except Exception:  # the factory reads its data: this case compiles in the runner
            skipped.append(case.name)
    return calls, skipped
