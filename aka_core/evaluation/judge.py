"""The judge: the trusted process of an evaluation. Candidate code never runs here.

Started by ``evaluate.evaluate`` as ``python -m aka_core.evaluation.judge FD`` with the request
(and the per-evaluation secret) on stdin. The judge

* starts two runners (``runner.py``), one for the baseline and one for the candidate, each
  confined (``aka_core.evaluation.sandbox``) before it imports the side's code, with private build caches
  (filled from, and kept in, ``kernel_cache``'s store under a key of the side's own files);
* loads the task's reference and input factory itself, from the verified task copy; derives every
  seed from the secret, which never leaves this process; draws the secret held-out cases;
* checks the candidate on fresh inputs against the reference, reading the outputs itself
  (``protocol``: bytes on a CPU, GPU memory it maps on a GPU), checks their structure, that the
  inputs are unchanged, the task's rules (``policy``) and its precision rule;
* times both sides with its own clock (``timing``), audits timed outputs it chooses in secret,
  rejects times below the speed of light, and checks that the baseline was not slowed while the
  candidate's process was alive;
* sends phases and the final record to its parent over the pipe FD.

A failure is classified: the candidate's (it did not build, was wrong, hung, crashed, broke the
protocol or a rule, read impossibly fast), the task's (``task_error``: its baseline or reference
failed), or the evaluator's (``infra_error``: confinement unavailable, a runner of the baseline
killed from outside, the judge's own fault) — never a zero reward a trainer should learn from.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aka_core.errors import BuildError
from aka_core.evaluation import checking, holder_cpus, protocol
from aka_core.evaluation.arena import (  # noqa: F401 (re-exported: the arena's home was here)
    ALIGN,
    CTRL_BYTES,
    OutputReader,
    arena_views,
    input_signature,
    map_runner_arena,
    output_budget,
    shifted,
    slot_layout,
)
from aka_core.evaluation.failures import INFRA, FailureKind, JudgeFailure
from aka_core.evaluation.request import EvaluationRequest
from aka_core.evaluation.sandbox import SANDBOX_PROTECTED_ALWAYS
from aka_core.evaluation.seeds import derive_seed, draw_held_out
from aka_core.evaluation.sides import (
    DISK_LIMIT,
    MEMORY_LIMIT,
    RAISED,
    UNASKED,
    WATCHED,
    RunnerProcess,
    SideFailure,
)
from aka_core.evaluation.steps import Steps, summed_seconds
from aka_core.models import TASK_FILE
from aka_core.plugin.host import cached_host

STARTUP_SECONDS = 300.0
POISON_FACTOR = 2
TASK_CODE_SECONDS = 120.0


class Channel:
    def __init__(self, fd: int):
        self.stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def send(self, event: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"event": event, **fields}, default=str) + "\n")
        self.stream.flush()


class Judge:
    def __init__(self, request: EvaluationRequest, channel: Channel, warm: Any = None):
        self.channel = channel
        self.warm = warm  # warm.WarmRunners: runners started before the request, or None
        secret = request.secret_seed
        draw_seed = (derive_seed(secret, "draws") if request.held_out_seed is None
                     else derive_seed(request.held_out_seed, "draws"))
        self.held_out_cases = (draw_held_out(request.held_out_draws, draw_seed)
                               if request.held_out_draws is not None else [])
        self.cases = [*request.cases, *self.held_out_cases]
        self.held_out = {*request.held_out, *(c.name for c in self.held_out_cases)}
        self.case_seeds = {c.name: [derive_seed(secret, "check", c.name, i)
                                    for i in range(request.seeds_per_case)] for c in self.cases}
        self.timing_root = derive_seed(secret, "timing")
        import attrs

        self.req = attrs.evolve(request, secret_seed=0, held_out_seed=None)
        self.result: dict[str, Any] = {"phases": {}}
        self._phase: str | None = None
        self._phase_start = time.monotonic()
        self.limit = STARTUP_SECONDS
        self.runners: dict[str, RunnerProcess] = {}
        self._waited_at_phase: dict[str, float] = {}
        self.io: dict[str, Any] = {}
        self.scratch = Path.cwd()
        self.confinement: dict[str, Any] = {}
        self.kernel_caches: dict[str, tuple[str | None, Path, dict[str, Any]]] = {}
        self.side_scratch: dict[str, Path] = {}
        self.side_init: dict[str, dict[str, Any]] = {}
        self.structures: dict[str, list[tuple[tuple[int, ...], Any]]] = {}
        # The first case's first inputs and reference, made for the compile phase's call and
        # checked against first in the correctness phase (made once).
        self.first_check: tuple[str, dict[str, Any], list[Any]] | None = None
        self.sides_quiet = False  # set once the timing ended normally (see ``close``)
        self.holding: holder_cpus.Holding | None = None
        self.disk: Any = None  # disk_watch.DiskWatch, from the runners' start
        self.memory: Any = None  # memory_watch.MemoryWatch, from the runners' start
        self.collector: Any = None  # watch_thread.EveryStep: the candidate's exited strays collected
        self.builder_processes: dict[str, RunnerProcess] = {}

    # ------------------------------------------------------------------ phases
    def phase(self, name: str) -> None:
        now = time.monotonic()
        if self._phase is not None:
            self.result["phases"][self._phase] = round(now - self._phase_start, 4)
        self._phase, self._phase_start = name, now
        self._waited_at_phase = {side: runner.waited_s for side, runner in self.runners.items()}
        limits = self.req.timeouts
        self.limit = {"compile": limits.compile_seconds, "correctness": limits.correctness_seconds,
                      "timing": limits.timing_seconds}.get(name, STARTUP_SECONDS)
        self.channel.send("phase", phase=name)

    def remaining(self) -> float:
        """Seconds left in the current phase's limit (the task's ``timeouts``)."""
        return self._phase_start + self.limit - time.monotonic()

    def candidate_seconds(self, limit: float) -> float:
        """How long the judge may wait on the candidate: ``limit``, within what is left of the
        phase. Its waits are never what takes the judge past the phase, where the parent stops
        it as a fault of the evaluator (a retry: a candidate could have bought itself one)."""
        return max(0.5, min(limit, self.remaining()))

    def spent_by_candidate(self) -> bool:
        """Whether the phase, now (nearly) over, went on waiting for the candidate more than
        for the baseline: a side that then runs out of time is not at fault."""
        if self.remaining() > 1.0:
            return False
        waited = {side: runner.waited_s - self._waited_at_phase.get(side, 0.0)
                  for side, runner in self.runners.items()}
        return waited.get("candidate", 0.0) > waited.get("baseline", 0.0)

    def phase_spent_failure(self) -> JudgeFailure:
        return JudgeFailure(FailureKind.TIMEOUT, f"the {self._phase} phase ran past its limit of "
                            f"{self.limit:.0f} s, most of it waiting for the candidate")

    def _timed_out(self, side: str, exc: SideFailure) -> SideFailure:
        if exc.kind == FailureKind.TIMEOUT:
            return SideFailure(FailureKind.TIMEOUT, f"the {self._phase} phase ran past its limit of "
                               f"{self.limit:.0f} s: the {side} did not answer", **exc.details)
        return exc

    def run(self) -> dict[str, Any]:
        from aka_core.evaluation import sides

        self.phase("startup")
        sides.become_subreaper()
        self.start_runners()
        self.watch_sides()
        self.load_task_side()
        builders = self.start_builders()
        if self.device == "cuda":
            # While the runners start: the comparison's kernel compiled or found in Triton's
            # cache, not under the GPU lock (once: a judge started ahead did it already).
            from aka_core.evaluation import fused_compare

            fused_compare.warm()
        self.await_confinement()
        self.finish_builders(builders)
        self.await_ready()
        if self.device == "cuda":
            # The evaluation owns the GPU from before any side's code is imported: code run at
            # import (or left running) could otherwise slow another evaluation's blocks.
            self.phase("gpu_wait")
            self._gpu_lock = acquire_gpu_lock()
            self.read_device_memory()  # no side's code has run: what others hold, alone
            # Its processes onto the CPUs the service keeps for this GPU's holder, away from the
            # evaluations starting meanwhile (``holder_cpus``).
            self.holding = holder_cpus.hold()
        for side in self.runners:
            # A side may be gone already: killed by a watch for what its builder did, or
            # exited on its own. Its failure, like every later one, is judged (``side_failure``).
            self._send(side, "load", "startup")
        self.phase("compile")
        steps: dict[str, float] = {}  # diagnostics: the phase's seconds by step
        step = Steps(steps)
        self.await_runners()
        step("load")
        if self.req.compile_only_architecture:
            self.compile_only()
            self.phase("done")
            return self.result
        self.check_rules_statically()
        step("rules")
        self.prepare_both(step)
        self.result["compile"]["steps_s"] = summed_seconds([steps])
        self.phase("correctness")
        self.check_correctness()
        if self.req.measure_performance and self.device == "cuda":
            self.phase("timing")
            from aka_core.evaluation import timing

            timing.measure(self)
            self.sides_quiet = True  # the candidate is gone, the baseline idle (``close``)
        else:
            self.result["performance"] = {
                "measured": False,
                "reason_not_measured": (
                    "performance was not measured: no GPU (correctness ran on the CPU"
                    + (" through Triton's interpreter)" if self.req.backend == "triton" else ")")
                    if self.device != "cuda" else "performance measurement was switched off")}
        self.phase("done")
        return self.result

    # ------------------------------------------------------------------ runners
    def sandbox_spec(self, side_root: Path, scratch: Path) -> dict[str, Any]:
        from aka_core.evaluation import kernel_cache, sandbox

        store = kernel_cache.store()
        protected = [*self.req.protected, *SANDBOX_PROTECTED_ALWAYS,
                     *([str(store)] if store is not None else [])]
        other_roots = [str(Path(r.root)) for r in (self.req.reference, self.req.baseline,
                                                  self.req.candidate) if r is not None]
        # A side never reads the other side's folder (the candidate never reads the task copy
        # with its held-out cases and reference), unless they are the same folder.
        protected += [r for r in other_roots if Path(r).resolve() != side_root.resolve()]
        # Nor the other runner's scratch (its caches, its builds), nor a builder's (``prebuild``).
        protected += [str(self.scratch / s) for s in ("baseline", "candidate", "baseline-builder",
                                                      "candidate-builder")
                      if (self.scratch / s).resolve() != scratch.resolve()]
        return sandbox.build_spec(scratch=scratch, read=[str(side_root), *code_folders(self.req)],
                                  protected=protected,
                                  required=self.req.confinement == "required").to_json()

    def start_runners(self) -> None:
        import attrs

        from aka_core.evaluation.request import SideRef

        req = self.req
        cand = req.candidate or req.baseline
        plan = {"baseline": (req.baseline, "aka_side_baseline"),
                "candidate": (cand, "aka_side_candidate")}
        warm = self.warm
        if warm is not None:
            why = warm.unfit(req, {side: ref.root for side, (ref, _) in plan.items()})
            self.result["warm"] = {"used": why is None, **({"reason": why} if why else {})}
            if why is not None:
                warm.discard()
                warm = self.warm = None
        roots: dict[str, str] = {}
        for side, (ref, package) in plan.items():
            if warm is not None:
                runner, scratch = warm.runners[side], warm.scratch(side)
                # The runner reads the side from its stage: a copy made now, which the static
                # checks below read too (what runs is what was checked).
                roots[side] = warm.stage_side(side, ref.root)
            else:
                scratch = self.scratch / side
                if scratch.exists():
                    shutil.rmtree(scratch)
                scratch.mkdir(parents=True)
                roots[side] = ref.root
                runner = RunnerProcess(side, scratch=scratch,
                                       env=runner_environment(scratch, req.backend_env),
                                       log_path=runner_log(side, self.scratch))
                runner.send(op="confine", sandbox=self.sandbox_spec(Path(ref.root), scratch),
                            confine=req.confinement != "off")
            self.runners[side] = runner
            self.side_scratch[side] = scratch
            # Before the side's first code runs (the runner waits for "init").
            self.restore_kernel_cache(side, Path(roots[side]), scratch / "cache")
            init = {"device": req.device, "backend": backend_factory_path(req), "root": roots[side],
                    "ref": ref.ref, "package": package, "env": dict(req.backend_env)}
            self.side_init[side] = init
            runner.send(op="init", **init)
        if warm is not None:
            self.req = attrs.evolve(
                req, baseline=SideRef(root=roots["baseline"], ref=req.baseline.ref),
                candidate=None if req.candidate is None else SideRef(root=roots["candidate"],
                                                                     ref=req.candidate.ref))

    def watch_sides(self) -> None:
        """Each side's disk and memory use watched while it lives: over a limit, it is killed
        and its runner's death is a ``resources`` failure (``disk_watch``, ``memory_watch``)."""
        from aka_core.evaluation import disk_watch, memory_watch, watch_thread

        self.disk = disk_watch.DiskWatch()
        self.memory = memory_watch.MemoryWatch()
        for side in self.runners:
            roots = functools.partial(self._side_processes, side)
            self.disk.watch(side, [self.side_scratch[side], self.scratch / f"{side}-builder"],
                            roots=roots, over=functools.partial(self._over_limit, side, DISK_LIMIT))
            self.memory.watch(side, roots=roots,
                              over=functools.partial(self._over_limit, side, MEMORY_LIMIT),
                              unasked=functools.partial(self._unasked, side))
        # The candidate's strays that exited, collected 20 times a second (``_collected``).
        self.collector = watch_thread.EveryStep(0.05, functools.partial(self._strays, "candidate"))

    def _unasked(self, side: str) -> str | None:
        """What the side's runner or builder sent the judge unasked (``RunnerProcess.unasked``),
        kept as the side's verdict (cause ``unasked_descriptors``) before the memory watch has
        the side killed."""
        for process in self._side_runners(side):
            breach = process.unasked()
            if breach is not None:
                runner = self.runners[side]
                if runner.over_limit is None:
                    runner.over_cause, runner.over_limit = UNASKED, breach
                return breach
        return None

    def _side_processes(self, side: str) -> list[int]:
        """The roots of a side's processes: its runner, its builder and its strays."""
        return [*(p.proc.pid for p in self._side_runners(side)), *self._strays(side)]

    def _side_runners(self, side: str) -> list[RunnerProcess]:
        return [p for p in (self.runners.get(side), self.builder_processes.get(side))
                if p is not None]

    def _strays(self, side: str) -> list[int]:
        """For the candidate, the processes that left its runner's and builder's trees and came
        back to the judge (a subreaper; runners start in sessions of their own, so what they
        leave is in none of the judge's). Those that exited are collected on the way
        (``_collected``), and not returned."""
        if side != "candidate":
            return []
        from aka_core.processes import children

        known = {p.proc.pid for p in (*self.runners.values(), *self.builder_processes.values())}
        own = os.getsid(0)  # the judge's own helpers (nvidia-smi, ptxas) share its session
        strays = []
        for pid in children(os.getpid()):
            with contextlib.suppress(OSError):
                if pid not in known and os.getsid(pid) != own and not _collected(pid):
                    strays.append(pid)
        return strays

    def _over_limit(self, side: str, cause: str, message: str) -> None:
        """A watch's verdict (from its thread): the side and what it started killed now."""
        from aka_core.processes import signal_tree

        runner = self.runners[side]
        if runner.over_limit is None:  # the first verdict is the one the record gives
            runner.over_cause, runner.over_limit = cause, message
        for process in self._side_runners(side):
            process.kill_soon()
        for pid in self._strays(side):
            signal_tree(pid, signal.SIGKILL)

    def restore_kernel_cache(self, side: str, root: Path, cache: Path) -> None:
        """The side's compiled kernels from an earlier evaluation of the same files
        (``kernel_cache``), copied into its private cache before it starts."""
        from aka_core.evaluation import kernel_cache, sandbox

        cache.mkdir(parents=True, exist_ok=True)
        cache_key = None
        if self.req.confinement == "off" or sandbox.landlock_abi() <= 0:
            # Unconfined runners could write into the store itself: no kernels are shared.
            restored = {"used": False, "reason": "runners not confined"}
        else:
            with contextlib.suppress(OSError):
                cache_key = kernel_cache.key(side, self.req.task_id, self.req.backend,
                                             dict(self.req.backend_env), root)
            restored = kernel_cache.restore(cache_key, cache)
        self.kernel_caches[side] = (cache_key, cache, restored)
        self.result.setdefault("kernel_cache", {})[side] = {
            "key": cache_key[:16] if cache_key else None, **restored}

    def save_kernel_caches(self) -> None:
        """Keep what each side compiled (its runner is gone, or after a normal timing is the idle
        baseline, signalled to die: nothing writes there any more)."""
        from aka_core.evaluation import kernel_cache

        confined = bool(self.result.get("confinement", {}).get("confined"))
        for side, (cache_key, cache, restored) in self.kernel_caches.items():
            saved = (kernel_cache.save(cache_key, cache, restored) if confined else
                     {"saved": False, "reason": "runners not confined"})
            self.result.setdefault("kernel_cache", {}).setdefault(side, {})["saved"] = saved

    def start_builders(self) -> dict[str, Any]:
        """Before the GPU lock, a builder per side whose kernels may need building
        (``prebuild``): they then build while no GPU is held. Returns the started ones. Nothing
        here fails the evaluation: a builder that cannot start leaves the build to the runner."""
        if self.device != "cuda" or self.req.compile_only_architecture:
            if self.warm is not None:
                self.warm.discard_builders()
            return {}  # no GPU lock to build before
        records: dict[str, dict[str, Any]] = {}
        self.result["prebuild"] = records
        try:
            return self._start_builders(records)
        except Exception as exc:  # an evaluator fault here must not cost the evaluation
            if self.warm is not None:
                self.warm.discard_builders()
            for side in self.runners:
                records.setdefault(side, {"ran": False, "reason": "the builders could not "
                                          f"start: {type(exc).__name__}: {exc}"[:300]})
            return {}

    def _start_builders(self, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
        from aka_core.evaluation import prebuild

        backend = cached_host(self.req.backend_plugin).backend(self.req.backend).factory()
        kind = getattr(backend, "build_ahead", None)
        started: dict[str, Any] = {}
        architecture: str | None = None
        calls: list[dict[str, Any]] | None = None
        skipped: list[str] = []
        for side in self.runners:
            restored = self.kernel_caches.get(side, (None, None, {}))[2]
            why = prebuild.wanted(kind, self.device, bool(self.req.compile_only_architecture),
                                  restored)
            if why is None:
                architecture = architecture or prebuild.gpu_architecture()
                why = None if architecture else "the GPU's architecture is unknown"
            if why is None and kind == "call" and calls is None:
                # Asked for CPU tensors (fake ones: nothing allocated, nothing run), so that no
                # GPU work precedes the lock; the corpus' factories do not branch on the device.
                with task_code_deadline(TASK_CODE_SECONDS, "the inputs factory (shapes)", "all"):
                    calls, skipped = prebuild.meta_inputs(self.make_inputs, self.cases,
                                                          self.case_seeds, "cpu")
            if why is None and kind == "call" and not calls:
                why = "no case's shapes are known without running its inputs factory"
            if why is not None:
                records[side] = {"ran": False, "reason": why}
                continue
            scratch = self.scratch / f"{side}-builder"
            init = self.side_init[side]
            ahead = self.warm.take_builder(side) if self.warm is not None else None
            if ahead is not None:  # started with the judge, confined for this request
                started[side] = prebuild.Builder.adopt(
                    side, ahead, runner_cache=self.side_scratch[side] / "cache",
                    architecture=str(architecture), init=init,
                    calls=calls if kind == "call" else None, shapes_unknown=len(skipped))
                self.builder_processes[side] = started[side].process
                continue
            try:
                started[side] = prebuild.Builder.start(
                    side, scratch=scratch, runner_cache=self.side_scratch[side] / "cache",
                    env=runner_environment(scratch, self.req.backend_env),
                    spec=self.sandbox_spec(Path(init["root"]), scratch),
                    confine=self.req.confinement != "off", architecture=str(architecture),
                    init=init, log_path=runner_log(f"{side}-builder", self.scratch),
                    calls=calls if kind == "call" else None, shapes_unknown=len(skipped))
                self.builder_processes[side] = started[side].process
            except (OSError, SideFailure) as exc:
                records[side] = {"ran": False, "reason": f"the builder did not start: {exc}"[:300]}
        if self.warm is not None:
            self.warm.discard_builders()  # the ones no side needed
        return started

    def finish_builders(self, builders: Mapping[str, Any]) -> None:
        from aka_core.evaluation import sides

        deadline = time.monotonic() + self.req.timeouts.compile_seconds
        for side, builder in builders.items():
            try:
                self.result["prebuild"][side] = builder.finish(deadline)
            except Exception as exc:  # an evaluator fault: the runner builds as before
                builder.process.kill()
                self.result["prebuild"][side] = {"ran": True, "outcome": "failed",
                                                 "reason": f"{type(exc).__name__}: {exc}"[:300]}
        if builders:
            # Nothing a builder started outlives it: a daemon of its own session, reparented to
            # the judge (a subreaper), would otherwise live on the host through the timed phase.
            # No side's code has run in the runners yet: whatever else is below the judge is
            # a builder's.
            sides.kill_orphans({r.proc.pid for r in self.runners.values() if hasattr(r, "proc")})

    def await_confinement(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        confined = True
        for side, runner in self.runners.items():
            reply = self._read(runner, deadline, "start-up", phase="startup")
            if reply.get("event") == "sandbox_failed":
                raise JudgeFailure(INFRA, f"the {side} runner could not be confined: "
                                   f"{reply.get('message')} (set evaluation.confinement: "
                                   "best_effort to evaluate with what this host offers)")
            if reply.get("event") != "sandboxed":
                raise JudgeFailure(INFRA, f"the {side} runner did not start: {reply}")
            record = reply.get("confinement")
            self.confinement[side] = record if isinstance(record, dict) else {}
            confined = confined and bool(self.confinement[side].get("confined"))
        self.result["confinement"] = {"policy": self.req.confinement, "confined": confined,
                                      **self.confinement}

    def await_ready(self) -> None:
        """Both runners have done what precedes the side's code (the backend's imports, the
        CUDA context): the GPU lock is then held for the sides' work alone, and a runner that
        fails before it is the host's fault (no code of the side has run in it)."""
        deadline = time.monotonic() + STARTUP_SECONDS
        for side, runner in self.runners.items():
            reply = self._read(runner, deadline, "start-up", phase="startup")
            if reply.get("event") == "setup_failed":
                raise JudgeFailure(INFRA, f"the {side} runner could not be set up before loading "
                                   f"any of the side's code: {reply.get('message')}; retry")
            if reply.get("event") != "ready":
                raise JudgeFailure(INFRA, f"the {side} runner sent {str(reply)[:200]} before "
                                   "loading any of the side's code")

    def await_runners(self) -> None:
        deadline = time.monotonic() + self.req.timeouts.compile_seconds
        for side, runner in self.runners.items():
            reply = self._read(runner, deadline, "loading its code")
            if reply.get("event") == "build_failed":
                self._build_failed(side, reply)
            elif reply.get("event") != "loaded":
                raise JudgeFailure(FailureKind.PROTOCOL if side == "candidate" else INFRA,
                                   f"the {side} runner sent {str(reply)[:200]} while loading")

    def _read(self, runner: RunnerProcess, deadline: float, what: str,
              phase: str = "compile") -> dict[str, Any]:
        try:
            return runner.read(max(1.0, deadline - time.monotonic()), what)
        except SideFailure as exc:
            raise self.side_failure(runner.side, self._timed_out(runner.side, exc),
                                    phase) from None

    def _build_failed(self, side: str, reply: Mapping[str, Any]) -> None:
        message = str(reply.get("message", ""))[:6000]
        where = {**protocol.source_place(reply.get("file"), reply.get("line")), "side": side}
        # A host that cannot build this backend's code at all (no compiler, no headers) judges
        # nobody: asked of the backend here, in the judge, never taken from a runner's words.
        unable = self.host_cannot_build()
        if unable is not None:
            raise JudgeFailure(INFRA, f"this host cannot build {self.req.backend} code ({unable}); "
                               f"the {side} was not judged: install the toolchain, or evaluate "
                               f"where it is (the {side}'s build said: {message[:500]})", **where)
        if side == "candidate":
            raise JudgeFailure(FailureKind.COMPILE, f"candidate does not build: {message}", **where)
        kind = INFRA if _missing_tool(message) else FailureKind.TASK_ERROR
        raise JudgeFailure(kind, f"baseline does not build: {message}", **where)

    def host_cannot_build(self) -> str | None:
        """Why this host cannot build the task's backend (its ``readiness``), or None."""
        try:
            readiness = cached_host(self.req.backend_plugin).backend(self.req.backend).factory().readiness()
        except Exception:  # a broken readiness check says nothing either way
            return None
        return None if readiness.build else str(readiness.detail)

    def side_failure(self, side: str, exc: SideFailure, phase: str) -> JudgeFailure:
        """A runner's failure as the evaluation's: the candidate's fault, or the task's/host's."""
        details = dict(exc.details)
        if details.get("cause") == UNASKED:  # it wrote on the judge's descriptor socket
            kind = FailureKind.PROTOCOL if side == "candidate" else FailureKind.TASK_ERROR
            return JudgeFailure(kind, f"{side}: {exc}", phase_of_failure=phase, **details)
        if details.get("cause") in WATCHED:
            # Killed for filling the disk or the host's memory (``disk_watch``,
            # ``memory_watch``), in any phase: its builder's code may have run before the
            # runner's. A baseline that does so breaks the task.
            kind = FailureKind.RESOURCES if side == "candidate" else FailureKind.TASK_ERROR
            return JudgeFailure(kind, f"{side}: {exc}", phase_of_failure=phase, **details)
        if phase == "startup":  # no code of the side has run yet: aka's or the host's fault
            return JudgeFailure(INFRA, f"the {side} runner failed before loading any of the "
                                f"side's code ({exc}); retry", phase_of_failure=phase, **details)
        if side == "candidate":
            kind = (FailureKind(exc.kind) if exc.kind != RAISED
                    else FailureKind.CORRECTNESS if phase == "correctness"
                    else FailureKind.COMPILE_OK_RUNTIME_ERROR if phase == "compile"
                    else FailureKind.TIMING_CHECK)
            if exc.kind == RAISED and details.get("build_error"):
                kind = FailureKind.COMPILE
            if exc.kind == FailureKind.CRASHED and self._gpu_taken_by_others():
                kind = INFRA
            text = f"candidate raised {exc}" if exc.kind == RAISED else f"candidate: {exc}"
            return JudgeFailure(kind, text, phase_of_failure=phase, **details)
        blamed = self.memory_failure(exc)
        if blamed is not None:
            return blamed
        if exc.kind == FailureKind.TIMEOUT and self.spent_by_candidate():
            return self.phase_spent_failure()
        kind = FailureKind.TASK_ERROR if exc.kind == RAISED and phase != "timing" else INFRA
        return JudgeFailure(kind, f"baseline: {exc}", phase_of_failure=phase, **details)

    def memory_failure(self, exc: BaseException) -> JudgeFailure | None:
        """An out-of-memory error while the candidate's process is alive on a GPU that had room
        when the evaluation began: the candidate's doing (it holds the memory)."""
        text = f"{type(exc).__name__}: {exc}"
        if "out of memory" not in text.lower() or self.device != "cuda":
            return None
        candidate = self.runners.get("candidate")
        if candidate is None or candidate.dead or self._gpu_taken_by_others():
            return JudgeFailure(INFRA, f"the GPU ran out of memory: {text}")
        return JudgeFailure(FailureKind.RESOURCES, f"the GPU ran out of memory while the candidate's process "
                            f"held it (it had room when the evaluation began): {text}")

    def read_device_memory(self) -> None:
        """The GPU's free memory now, and whether others hold over half of it (``shared``: a
        crash or an out-of-memory error is then not blamed on the candidate). Read again once
        the GPU lock is held: before it, the memory another evaluation's candidate holds under
        its lock would decide whom this evaluation blames (a candidate beside a hoarder could
        crash at will and be retried)."""
        import torch

        free, total = torch.cuda.mem_get_info()
        self.result["device_memory"] = {"free_gib": round(free / 2**30, 2),
                                        "total_gib": round(total / 2**30, 2),
                                        "shared": free < 0.5 * total}

    def _gpu_taken_by_others(self) -> bool:
        return bool(self.result.get("device_memory", {}).get("shared"))

    # ------------------------------------------------------------------ the task's side
    def load_task_side(self) -> None:
        from aka_core.kits.python_backend import PythonBackend

        loader = PythonBackend()
        req = self.req
        try:
            self.make_inputs = loader.load_callable(Path(req.inputs.root), req.inputs.ref,
                                                    "aka_judge_task")
            self.reference = loader.load_callable(Path(req.reference.root), req.reference.ref,
                                                  "aka_judge_task")
        except BuildError as exc:
            raise JudgeFailure(FailureKind.TASK_ERROR, f"the task's reference or inputs do not load: "
                               f"{exc.message}", file=exc.file, line=exc.line) from exc
        import torch

        self.device = req.device
        if self.device == "cuda" and not torch.cuda.is_available():
            raise JudgeFailure(INFRA, "a GPU was requested but PyTorch sees none")

        try:
            backend = cached_host(req.backend_plugin).backend(req.backend).factory()
            self.result["device"] = _asdict(backend.describe_device(self.device))
        except Exception as exc:  # a broken plugin: the evaluator's problem
            raise JudgeFailure(INFRA, f"backend {req.backend!r}: {type(exc).__name__}: {exc}") from exc
        if self.device == "cuda":
            self.read_device_memory()
        from aka_core import gpus

        name = (self.result.get("device") or {}).get("name") or ""
        self.gpu_model = gpus.model_of_device(name) if self.device == "cuda" else None

    def inputs_for(self, case: Any, seed: int) -> dict[str, Any]:
        params = dict(case.params)
        try:
            with task_code_deadline(self.task_code_seconds(), "the inputs factory", case.name):
                inputs = self.make_inputs(params, seed, self.device)
        except JudgeFailure:
            raise
        except KeyError as exc:
            key = exc.args[0] if exc.args else None
            if isinstance(key, str) and key not in params:
                raise JudgeFailure(FailureKind.TASK_ERROR, f"the inputs factory needs parameter {key!r}, "
                                   f"which case {case.name} does not set (its params: "
                                   f"{', '.join(params) or 'none'}): add it to the case in "
                                   f"{TASK_FILE}", traceback=_short_tb(exc)) from exc
            raise JudgeFailure(FailureKind.TASK_ERROR, f"the inputs factory raised KeyError: {exc} (case "
                               f"{case.name})", traceback=_short_tb(exc)) from exc
        except BaseException as exc:
            blamed = self.task_code_memory_failure(
                exc, "the inputs factory", case, lambda: self.make_inputs(params, seed, self.device))
            if blamed is not None:
                raise blamed from None
            raise JudgeFailure(FailureKind.TASK_ERROR, f"the inputs factory raised {type(exc).__name__}: "
                               f"{exc} (case {case.name})", traceback=_short_tb(exc)) from exc
        if not isinstance(inputs, Mapping) or not all(isinstance(k, str) for k in inputs):
            raise JudgeFailure(FailureKind.TASK_ERROR, f"the inputs factory returned a "
                               f"{type(inputs).__name__} (case {case.name}); it must return a dict "
                               "of the entry point's argument names to tensors or values")
        return dict(inputs)

    def reference_outputs(self, case: Any, inputs: Mapping[str, Any]) -> list[Any]:
        try:
            with task_code_deadline(self.task_code_seconds(), "the reference", case.name):
                return checking.as_tensors(self.reference(**inputs))
        except JudgeFailure:
            raise
        except BaseException as exc:
            blamed = self.task_code_memory_failure(exc, "the reference", case,
                                                   lambda: self.reference(**inputs))
            if blamed is not None:
                raise blamed from None
            raise JudgeFailure(FailureKind.TASK_ERROR, f"the reference raised {type(exc).__name__}: {exc} "
                               f"(case {case.name})", traceback=_short_tb(exc)) from exc

    def task_code_memory_failure(self, exc: BaseException, what: str, case: Any,
                                 again: Callable[[], Any]) -> JudgeFailure | None:
        """The task's own code (``what``) ran out of GPU memory while the candidate's process
        was alive: whose doing it was is tested, not guessed. The candidate's processes are
        killed (their memory freed) and the same call is made again: if it now runs, the
        candidate held the memory (``resources``, its failure); if it fails again, the task's
        failure (None: as any other exception of its code), or, on a GPU other processes were
        using when the evaluation began, the evaluator's (``infra_error``, retryable). A candidate
        that grabs the GPU's memory at import would otherwise turn its evaluation into the task's
        error."""
        text = f"{type(exc).__name__}: {exc}"
        if "out of memory" not in text.lower() or self.device != "cuda":
            return None
        candidate = self.runners.get("candidate")
        if candidate is not None and not candidate.dead and self._runs_without_candidate(
                candidate, what, case, again):
            return JudgeFailure(FailureKind.RESOURCES, f"{what} ran out of GPU memory on case "
                                f"{case.name} while the candidate's process held it, and ran once "
                                f"the candidate's processes were killed: {text[:300]}",
                                case=case.name)
        if self._gpu_taken_by_others():
            return JudgeFailure(INFRA, f"{what} ran out of GPU memory on case {case.name} on a GPU "
                                "that other processes were using when the evaluation began: "
                                f"{text[:300]}", case=case.name)
        return None

    def _runs_without_candidate(self, candidate: RunnerProcess, what: str, case: Any,
                                again: Callable[[], Any]) -> bool:
        """Whether ``again`` runs once the candidate's processes are killed and gone."""
        from aka_core.evaluation import sides

        candidate.kill()
        baseline = self.runners.get("baseline")
        # Everything the candidate started too, waited for until gone: a child holding the memory
        # and still exiting would fail the call again and make the task look at fault.
        sides.kill_orphans_and_wait({baseline.proc.pid} if baseline is not None else set())
        try:
            import torch

            torch.cuda.empty_cache()
            with task_code_deadline(self.task_code_seconds(), what, case.name):
                again()
        except BaseException:
            return False
        return True

    def task_code_seconds(self) -> float:
        """How long one call of the task's own code (inputs, reference) may take: a hang there
        is the task's fault, not the candidate's, and must not wait for the phase's limit."""
        return max(1.0, min(TASK_CODE_SECONDS, self.remaining()))

    # ------------------------------------------------------------------ compile
    def compile_only(self) -> None:
        inputs = self.inputs_for(self.cases[0], self.case_seeds[self.cases[0].name][0])
        facts: dict[str, Any] = {}
        for side in self.runners:
            if side == "candidate" and self.req.candidate is None:
                continue
            reply = self._request(side, "prepare", "compile",
                                  inputs=protocol.encode_inputs_cpu(inputs))
            if kept := protocol.side_facts(reply.get("facts")):
                facts[side] = kept
        self.result["compile"] = {"passed": True}
        record = compile_only_record(self.req, built=True, sides=facts)
        self.result["compile_only"] = record
        self.result["performance"] = {"measured": False, "reason_not_measured": record["note"]}

    def prepare_both(self, step: Steps | None = None) -> None:
        """Both sides build and warm up at once (each in its own process)."""
        step = step or Steps({})
        started = time.monotonic()
        first = self.cases[0]
        inputs = self.inputs_for(first, self.case_seeds[first.name][0])
        facts: dict[str, Any] = {}
        self.io = {side: SideIO(self, side) for side in self.runners}
        step("inputs")
        ref = self.reference_outputs(first, inputs)
        self.first_check = (first.name, inputs, ref)
        step("reference")
        out_bytes = output_budget(ref)
        loaded = load_inputs(list(self.io.values()), inputs, out_bytes)
        for side in self.runners:
            self._send(side, "prepare", "compile", **loaded[side])
        step("send")
        # The baseline first: a baseline that does not build is the task's fault, whatever the
        # candidate did.
        for side in self.runners:
            try:
                reply = self._answer(side, "prepare", "compile")
            except JudgeFailure as exc:
                if side == "candidate" and exc.kind in (FailureKind.TIMEOUT, FailureKind.CRASHED,
                                                     FailureKind.PROTOCOL):
                    exc.details["stage"] = "first_call"  # it built; its first call failed
                raise
            if kept := protocol.side_facts(reply.get("facts")):
                facts[side] = kept
        step("prepare")
        self.result["compile"] = {"passed": True, "seconds": round(time.monotonic() - started, 4)}
        if facts:
            self.result["compile"]["sides"] = facts

    def _request(self, side: str, op: str, phase: str, timeout: float | None = None,
                 **fields: Any) -> dict[str, Any]:
        self._send(side, op, phase, **fields)
        return self._answer(side, op, phase, timeout)

    def _send(self, side: str, op: str, phase: str, **fields: Any) -> None:
        try:
            self.runners[side].send(op=op, **fields)
        except SideFailure as exc:
            raise self.side_failure(side, self._timed_out(side, exc), phase) from None

    def _answer(self, side: str, op: str, phase: str, timeout: float | None = None
                ) -> dict[str, Any]:
        runner = self.runners[side]
        limit = max(0.5, min(timeout or math.inf, self.remaining()))
        try:
            return runner.answer(op, limit)
        except SideFailure as exc:
            exc = self._timed_out(side, exc)
            if phase == "compile" and exc.kind == RAISED and not exc.details.get("build_error"):
                if side == "candidate":
                    raise JudgeFailure(FailureKind.COMPILE_OK_RUNTIME_ERROR, f"candidate raised: {exc}",
                                       **exc.details) from None
                raise JudgeFailure(FailureKind.TASK_ERROR, f"baseline raised: {exc}", **exc.details) from None
            if phase == "compile" and exc.details.get("build_error"):
                self._build_failed(side, {"message": str(exc), **exc.details})
            raise self.side_failure(side, exc, phase) from None

    # ------------------------------------------------------------------ rules
    def check_rules_statically(self) -> None:
        rules = self.req.rules
        self.result["rules"] = {"torch_compute": rules.torch_compute,
                                "torch_copies": rules.torch_copies,
                                "compute_precision": rules.compute_precision}
        if rules.torch_compute != "forbidden" or self.req.candidate is None:
            return
        from aka_core.evaluation import policy

        violations = policy.check_sources(Path(self.req.candidate.root),
                                          list(self.req.candidate_files))
        self.result["rules"]["static_violations"] = [str(v) for v in violations]
        if violations:
            first = violations[0]
            raise JudgeFailure(FailureKind.POLICY, policy.describe_violations(violations),
                               file=first.file, line=first.line)

    # ------------------------------------------------------------------ correctness
    def check_correctness(self) -> None:
        checks: list[dict[str, Any]] = []
        self.result["correctness"] = {"passed": False, "checks": checks}
        profile = self.req.rules.torch_compute == "forbidden" and self.req.candidate is not None
        ops_seen: set[str] = set()
        steps: dict[str, float] = {}  # diagnostics: the phase's seconds by step
        self.result["correctness"]["steps_s"] = steps
        step = Steps(steps)
        for case in self.cases:
            held_out = case.name in self.held_out
            for index, seed in enumerate(self.case_seeds[case.name]):
                step.skip()
                if index == 0 and self.first_check and self.first_check[0] == case.name:
                    _, inputs, ref = self.first_check  # the compile phase's, for this seed
                else:
                    inputs = self.inputs_for(case, seed)
                    step("inputs")
                    ref = self.reference_outputs(case, inputs)
                    step("reference")
                self.first_check = None
                repeats = 2 if index == 0 else 1  # a repeat catches unwritten or racy outputs
                # Operators are recorded on each case's first call (recording slows every
                # PyTorch call of the candidate; which operators it uses does not vary by seed).
                outs = self.call_both(inputs, ref, repeats=repeats,
                                      profile=profile and index == 0, case_name=case.name)
                step("calls")
                base = outs["baseline"][0]
                self.structures[case.name] = checking.structure_of(base)
                base_vs_ref = checking.compare_outputs(base, ref, self.req.tolerance)
                if not base_vs_ref["passed"]:
                    raise JudgeFailure(FailureKind.TASK_ERROR, "the baseline does not match the "
                                       f"reference on case {case.name}: {base_vs_ref['reason']}")
                entry: dict[str, Any] = {"case": case.name, "seed_index": index,
                                         "held_out": held_out}
                if held_out and case in self.held_out_cases:
                    entry["params"] = dict(case.params)
                baseline_rounding: float | None = None  # the same for every run of the case
                for run_index, out in enumerate(outs["candidate"]):
                    mismatch = checking.structure_mismatch(out, base)
                    if mismatch:
                        raise JudgeFailure(FailureKind.CORRECTNESS, f"{mismatch} (case {case.name})",
                                           case=case.name)
                    cmp = checking.compare_outputs(out, ref, self.req.tolerance)
                    if run_index == 0:
                        entry.update({k: cmp[k] for k in ("max_abs_err", "rel_l2") if k in cmp})
                    if not cmp["passed"]:
                        entry.update(passed=False, reason=cmp["reason"], run=run_index + 1)
                        checks.append(entry)
                        what = ("differs from the reference" if run_index == 0 else
                                "differs from the reference when called again on the same inputs "
                                "(unwritten outputs, a race or state kept between calls)")
                        raise JudgeFailure(FailureKind.CORRECTNESS, f"output {what} on case {case.name}: "
                                           f"{cmp['reason']}", case=case.name)
                    baseline_rounding = self.check_precision(out, ref, base, case.name, entry,
                                                             baseline_rounding)
                ops_seen |= set(outs.get("ops", ()))
                entry["baseline_rel_l2"] = base_vs_ref.get("rel_l2")
                entry["passed"] = True
                checks.append(entry)
                step("compare")
        self.result["correctness"]["steps_s"] = summed_seconds([steps])
        if profile:
            from aka_core.evaluation import policy

            copies = self.req.rules.torch_copies == "forbidden"
            # Triton's CPU interpreter writes every kernel's results back with copy_: on the CPU
            # (never timed, never paid) that operator cannot be told from the candidate's own.
            checked = ops_seen - {"copy_"} if copies and self.device != "cuda" else ops_seen
            computed = policy.check_ops(checked, copies=copies)
            self.result["rules"]["torch_ops_seen"] = sorted(ops_seen)
            if computed:
                also = (" (and PyTorch copies: moving the data is this task's work)"
                        if copies and set(computed) & policy.COPY_OPS else "")
                raise JudgeFailure(FailureKind.POLICY, "the candidate computed with PyTorch operators "
                                   f"({', '.join(computed)}); this task's rules forbid PyTorch "
                                   f"compute{also}: write the computation in the task's kernels")
        self.result["correctness"]["passed"] = True

    def check_precision(self, out: list[Any], ref: list[Any], base: list[Any], case: str,
                        entry: dict[str, Any], baseline: float | None = None) -> float | None:
        """The precision rule: no more disagreement with the float32 reference, once rounded to
        the output dtype, than the task's float32 baseline has (on the same platform: Triton's CPU
        interpreter truncates where GPUs round), plus ``max_rounding_mismatch``. Returns the
        baseline's disagreement (``baseline``: already measured on these outputs)."""
        rules = self.req.rules
        if rules.compute_precision != "float32":
            return None
        if baseline is None:
            baseline = checking.rounding_mismatch(base, ref)
        fraction = checking.rounding_mismatch(out, ref)
        allowed = baseline + rules.max_rounding_mismatch
        entry["rounding_mismatch"] = {"candidate": fraction, "allowed": allowed}
        if fraction > allowed:
            raise JudgeFailure(FailureKind.PRECISION, f"{fraction:.1%} of the output elements "
                               "differ from the float32 reference rounded to the output dtype "
                               f"(the baseline's float32 arithmetic allows {allowed:.1%}): the "
                               f"task requires float32 arithmetic (case {case})", case=case)
        return baseline

    def call_both(self, inputs: Mapping[str, Any], ref: list[Any], *, repeats: int,
                  profile: bool, case_name: str) -> dict[str, Any]:
        """Both sides on the same inputs (concurrently); their outputs, read by the judge."""
        expected_bytes = sum(t.numel() * t.element_size() for t in ref)
        results: dict[str, Any] = {"baseline": [], "candidate": []}
        for repeat in range(repeats):
            called = ("baseline", "candidate") if repeat == 0 else ("candidate",)
            loaded = load_inputs([self.io[side] for side in called], inputs, output_budget(ref))
            for side in called:
                self._send(side, "call", "correctness",
                           poison_bytes=expected_bytes * POISON_FACTOR,
                           profile=profile and side == "candidate", **loaded[side])
            for side in called:
                try:
                    reply = self._reply(side, "correctness")
                except JudgeFailure as exc:
                    raise JudgeFailure(exc.kind, f"{exc} (case {case_name})", case=case_name,
                                       **exc.details) from None
                outs = self.io[side].outputs(reply, ref)
                changed = self.io[side].changed_inputs(inputs, reply)
                if changed:
                    raise self._input_changed(side, changed, case_name)
                results[side].append(outs)
                if side == "candidate" and reply.get("ops"):
                    ops = reply["ops"]
                    results["ops"] = {str(o)[:100] for o in ops[:500]} if isinstance(ops, list) else set()
        return results

    def _input_changed(self, side: str, names: list[str], case: str) -> JudgeFailure:
        if side == "candidate":
            return JudgeFailure(FailureKind.CORRECTNESS, f"candidate modified its inputs {', '.join(names)} "
                                f"(case {case})", case=case)
        return JudgeFailure(FailureKind.TASK_ERROR, f"the baseline modified its inputs {', '.join(names)}")

    def _reply(self, side: str, phase: str) -> dict[str, Any]:
        runner = self.runners[side]
        try:
            reply = runner.read(max(0.5, self.remaining()), "a call")
        except SideFailure as exc:
            raise self.side_failure(side, self._timed_out(side, exc), phase) from None
        if reply.get("ok") is not True:
            exc = SideFailure(RAISED, str(reply.get("error", "failed"))[:4000], side=side,
                              traceback=str(reply.get("traceback", ""))[-3000:])
            raise self.side_failure(side, exc, phase)
        return reply

    def close(self) -> None:
        from aka_core.evaluation import sides

        for io in self.io.values():
            io.close()
        for runner in self.runners.values():
            runner.cont()
            runner.kill_soon()  # both killed, then waited for: their exits overlap
        baseline = self.runners.get("baseline")
        early = self.sides_quiet and baseline is not None
        if early:
            # The timing ended normally: the candidate's processes were killed and waited for
            # before the clean phase, and the baseline (the task's own code) has no GPU work
            # queued. With everything but the baseline gone, the next evaluation may have the GPU
            # while the baseline's context is torn down (0.1-0.2 s on an H200, which the lock
            # held serial): that overlaps the next one's untimed start, never a timed window.
            for side, runner in self.runners.items():
                if side != "baseline":
                    runner.kill()
            sides.kill_orphans({baseline.proc.pid})
            self.release_gpu_lock()
            # The baseline, idle and signalled, runs no more code of its own: its kernels are
            # kept now, and the record need not wait for its exit either (``reap`` waits after
            # the record is sent; a single request waited 0.13 s for it on an H200).
            self.save_kernel_caches()
            return
        for runner in self.runners.values():
            runner.kill()
        sides.kill_orphans(set())
        # Nothing of the sides is left: the next evaluation may have the GPU while this one
        # keeps its kernels and sends its record.
        self.release_gpu_lock()
        self.save_kernel_caches()

    def reap(self) -> None:
        """Wait until every side and what it started is gone (``close`` left the baseline
        signalled, not waited for, after a normal timing)."""
        from aka_core.evaluation import sides

        for runner in self.runners.values():
            runner.kill()
        sides.kill_orphans(set())

    def release_gpu_lock(self) -> None:
        lock = getattr(self, "_gpu_lock", None)
        if lock is not None:
            holding = getattr(self, "holding", None)
            if holding is not None:  # the next holder finds its CPUs idle
                holding.let_go()
            lock.close()
            self._gpu_lock = None


class SideIO:
    """Moves one case's inputs to a runner and its outputs back, for untimed calls.

    On a GPU the inputs go into the runner's arena (its own allocation, handed to the judge as a
    file descriptor); the candidate's outputs are read from the allocations it exported, the
    baseline's from the output region of its arena, and copied right away. On a CPU both travel
    as bytes in the messages.
    """

    def __init__(self, judge: Judge, side: str):
        self.judge = judge
        self.side = side
        self.arena: Any = None
        self.layout: dict[str, Any] | None = None
        self.views: dict[str, Any] = {}
        self.reader = OutputReader(side)
        self.signature: Any = None

    def load(self, inputs: Mapping[str, Any], out_bytes: int) -> dict[str, Any]:
        """Put ``inputs`` in the runner's arena (``load_inputs`` for this side alone)."""
        return load_inputs([self], inputs, out_bytes)[self.side]

    def send_setup(self, inputs: Mapping[str, Any], out_bytes: int) -> Any:
        """Ask the runner for a new arena where ``inputs``' shapes (or ``out_bytes``) changed:
        what ``map_setup`` needs to map it once the runner answers, or None if the arena
        stays. The baseline's arena also holds ``out_bytes`` for the copies of its outputs."""
        out_bytes = out_bytes if self.side == "baseline" else 0
        signature = (input_signature(inputs), out_bytes)
        if signature == self.signature:
            return None
        self.close()
        layout, size = slot_layout(inputs, CTRL_BYTES)
        out = [size, out_bytes] if out_bytes else None
        self.judge._send(self.side, "setup", "correctness", nbytes=size + out_bytes,
                         slots=[layout], out=out)
        return signature, layout, size, out_bytes

    def map_setup(self, pending: Any) -> None:
        """The runner's new arena mapped (``send_setup``'s answer read)."""
        signature, layout, size, out_bytes = pending
        reply = self.judge._answer(self.side, "setup", "correctness")
        self.arena = map_runner_arena(self.judge, self.side, reply, size + out_bytes)
        self.views = arena_views(self.arena.bytes, layout)
        if out_bytes:
            self.reader.region = (self.arena.bytes, size, size + out_bytes)
        self.signature, self.layout = signature, layout

    def outputs(self, reply: Mapping[str, Any], ref: list[Any]) -> list[Any]:
        descs = reply.get("outputs")
        if not isinstance(descs, list) or len(descs) > 64:
            raise self._violation("the outputs must be a list of at most 64 tensors")
        try:
            if self.judge.device != "cuda":
                return [protocol.decode_cpu(d) for d in descs]
            views = [self.reader.view(d) for d in descs]
            return [v.clone() for v in views]
        except protocol.ProtocolError as exc:
            raise self._violation(str(exc)) from None

    def changed_inputs(self, inputs: Mapping[str, Any], reply: Mapping[str, Any]) -> list[str]:
        if self.judge.device != "cuda":
            # On a CPU the runner has its own copy: it reports it after the call. Only an honest
            # mistake is caught this way (a CPU evaluation is never timed or paid).
            after = reply.get("inputs_after")
            if not isinstance(after, dict):
                return []
            import torch

            # Only the tensor inputs have bytes to compare: a runner that reported a number
            # (``eps``) back as a tensor made ``same_bytes`` raise here, the judge's failure (an
            # infra_error, retried in place of a wrong candidate's zero).
            try:
                return [name for name, item in after.items()
                        if isinstance(inputs.get(name), torch.Tensor)
                        and not checking.same_bytes(protocol.decode_cpu(item), inputs[name])]
            except protocol.ProtocolError:  # the input names only, not the side's keys
                return [name for name in inputs if name in after]
        return [name for name, view in self.views.items()
                if not checking.same_bytes(view, inputs[name])]

    def _violation(self, message: str) -> JudgeFailure:
        if self.side == "candidate":
            return JudgeFailure(FailureKind.PROTOCOL, f"candidate: {message}")
        return JudgeFailure(INFRA, f"baseline runner: {message}")

    def close(self) -> None:
        self.reader.close()
        self.reader.region = None
        if self.arena is not None:
            self.views = {}
            self.arena.close()
            self.arena = None
        self.signature = None


def load_inputs(ios: list[SideIO], inputs: Mapping[str, Any], out_bytes: int
                ) -> dict[str, dict[str, Any]]:
    """``inputs`` put in each side's runner arena; each side's fields for its next call. The
    runners that need a new arena set it up at once (every "setup" sent before any answer is
    read, in ``ios``' order: the baseline's first), then the inputs are copied in, with one wait
    for the GPU for all of them. On a CPU the inputs travel in the message."""
    if not ios:
        return {}
    judge = ios[0].judge
    if judge.device != "cuda":
        return {io.side: {"inputs": protocol.encode_inputs_cpu(inputs)} for io in ios}
    pending = [(io, io.send_setup(inputs, out_bytes)) for io in ios]
    for io, setup in pending:
        if setup is not None:
            io.map_setup(setup)
    for io in ios:
        for name, view in io.views.items():
            view.copy_(inputs[name])
    import torch

    torch.cuda.synchronize()
    return {io.side: {"slot": 0} for io in ios}


# --------------------------------------------------------------------------- task code


@contextlib.contextmanager
def task_code_deadline(seconds: float, what: str, case: str) -> Iterator[None]:
    """Raise ``JudgeFailure(FailureKind.TASK_ERROR)`` if the block runs longer than ``seconds`` (a Python
    loop in the task's inputs factory or reference; code blocked inside C is stopped by the
    phase's limit instead)."""
    import signal

    def expire(signum: int, frame: Any) -> None:
        raise JudgeFailure(FailureKind.TASK_ERROR, f"{what} did not return within {seconds:.0f} s (case "
                           f"{case}): the task's own code hangs or is far too slow")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------- helpers


def compile_only_record(req: EvaluationRequest, *, built: bool,
                        sides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    arch = req.compile_only_architecture
    if not built:
        return {"architecture": arch, "built": [],
                "note": f"compile-only for {arch}: the build failed; nothing ran"}
    sides = dict(sides or {})
    loaded = ["baseline"] + (["candidate"] if req.candidate is not None else [])
    # A side whose backend reported an empty build (PyTorch code) had nothing to build.
    names = [s for s in loaded if s not in sides or sides[s].get("built", True)]
    idle = [s for s in loaded if s not in names]
    idle_text = f"{' and '.join(idle)}: PyTorch code, nothing to build"
    if names:
        what = f"compile-only: {' and '.join(names)} built for {arch}"
        what += f" ({idle_text})" if idle else ""
    else:
        what = f"compile-only for {arch}: {idle_text}"
    record: dict[str, Any] = {
        "architecture": arch, "built": names,
        "note": f"{what}; this host has no such GPU, so correctness and timing were not run"}
    if sides:
        record["sides"] = sides
    return record


def _collected(pid: int) -> bool:
    """Whether the judge's child ``pid`` had exited and is now collected (its pid free again).
    The judge looks at the candidate's strays 20 times a second (``Judge.collector``) and
    collects the exited ones: a process that forks a successor and exits, thousands of times a
    second, left each one a zombie of the judge's (a subreaper), and filled the host's process
    ids (26,000 of 32,768 in seconds on a 2-core machine: every other process's fork failed)
    until the judge's next kill collected them."""
    return os.waitpid(pid, os.WNOHANG)[0] == pid


def runner_environment(scratch: Path, backend_env: Mapping[str, str]) -> dict[str, str]:
    """A runner's environment: the allowed part of the judge's, the backend's variables, and
    every home and cache folder in its scratch."""
    from aka_core.evaluation.evaluate import worker_base_environment

    env = {**worker_base_environment(), **backend_env,
           "HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp"),
           "XDG_CACHE_HOME": str(scratch / "cache"),
           "TRITON_CACHE_DIR": str(scratch / "cache" / "triton"),
           "TRITON_HOME": str(scratch / "home"),
           "AKA_BUILD_CACHE": str(scratch / "cache" / "builds"),
           "CUDA_CACHE_PATH": str(scratch / "cache" / "nv"),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # outputs must be exportable allocations
    return env


def runner_log(side: str, scratch: Path) -> Path:
    prefix = os.environ.get("AKA_JUDGE_LOG_PREFIX") or str(scratch / "evaluation")
    return Path(f"{prefix}.{side}.log")


def code_folders(req: EvaluationRequest) -> list[str]:
    """Folders of the installed code a runner imports: aka_core and the backend's plugin."""
    import importlib

    folders = [str(Path(importlib.import_module("aka_core").__file__).resolve().parent)]
    module = backend_factory_path(req).partition(":")[0].split(".")[0]
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.origin:
        folders.append(str(Path(spec.origin).resolve().parent))
    # Plugins a candidate imports to build its kernels (aka_backend_cuda.load, ...).
    for name in ("aka_backend_cuda", "aka_backend_hip", "aka_backend_flydsl", "flydsl"):
        found = importlib.util.find_spec(name)
        if found is not None and found.origin:
            folders.append(str(Path(found.origin).resolve().parent))
    return folders


def backend_factory_path(req: EvaluationRequest) -> str:
    factory = cached_host(req.backend_plugin).backend(req.backend).factory
    return f"{factory.__module__}:{factory.__qualname__}"


def _missing_tool(message: str) -> bool:
    text = message.lower()
    return any(s in text for s in ("not found on path", "no such file or directory: 'nvcc",
                                   "nvcc was not found", "cannot find nvcc", "hipcc was not found",
                                   "is not installed"))


def _asdict(obj: Any) -> dict[str, Any]:
    import attrs

    return attrs.asdict(obj)


def _short_tb(exc: BaseException, limit: int = 6) -> str:
    return "".join(traceback.format_exception(exc, limit=-limit))[-3000:]


def gpu_lock_path() -> Path:
    import torch

    from aka_core.gpus import gpu_lock_dir

    props = torch.cuda.get_device_properties(0)
    ident = str(getattr(props, "uuid", "") or os.environ.get("CUDA_VISIBLE_DEVICES", "0"))
    ident = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in ident)
    return gpu_lock_dir() / f"aka-gpu-{ident}.lock"


def acquire_gpu_lock() -> Any:
    """An exclusive lock on this GPU, held until the judge closes it (``Judge.close``, once no
    process of a side is left) or exits (the kernel releases it)."""
    import fcntl

    handle = open(gpu_lock_path(), "a+")  # noqa: SIM115 - held for the life of the process
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    return handle


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    channel = Channel(int(argv[0]))
    warm = None
    if len(argv) >= 3 and argv[1] == "--warm":
        # Started ahead of its request (``evaluate.prestart_judge``): what does not depend on it.
        from aka_core.evaluation import warm as warm_module

        profile = warm_module.WarmProfile.from_json(json.loads(argv[2]))
        warm = warm_module.WarmRunners(profile, Path.cwd(), runner_environment,
                                       str(runner_log("x", Path.cwd()))[: -len(".x.log")])
        import torch

        if profile.device == "cuda" and torch.cuda.is_available():
            torch.cuda.init()
            torch.cuda.mem_get_info()  # the context itself (init alone leaves it to a first call)
            from aka_core.evaluation import fused_compare

            fused_compare.warm()  # compiled now, not under the GPU lock
    request = EvaluationRequest.from_json(json.loads(sys.stdin.read()))
    sys.stdin.close()
    judge = Judge(request, channel, warm)
    del request
    code = 0
    profile = _profiler()
    try:
        result = judge.run()
    except JudgeFailure as exc:
        result = judge.result
        if judge.req.compile_only_architecture and "compile_only" not in result:
            result["compile_only"] = compile_only_record(judge.req, built=False)
        result["failure"] = {"kind": exc.kind, "message": str(exc), "phase": judge._phase,
                             **{k: v for k, v in exc.details.items() if k != "phase_of_failure"}}
    except BaseException as exc:
        result = judge.result
        blamed = judge.memory_failure(exc)
        if blamed is not None:
            result["failure"] = {"kind": blamed.kind, "message": str(blamed), "phase": judge._phase}
        else:
            result["failure"] = {"kind": INFRA, "phase": judge._phase,
                                 "message": f"the judge failed: {type(exc).__name__}: {exc}",
                                 "traceback": _short_tb(exc, 12)}
            code = 3
    finally:
        try:
            judge.close()
        except BaseException as exc:  # never lose the record for a cleanup fault
            result = judge.result
            result.setdefault("cleanup_error", f"{type(exc).__name__}: {exc}")
    result["diagnostics"] = {"runner_ops": {
        side: {op: {k: round(v, 4) if isinstance(v, float) else v for k, v in entry.items()}
               for op, entry in runner.op_stats.items()}
        for side, runner in judge.runners.items()}}
    from aka_core.evaluation import fused_compare

    result["diagnostics"]["quick_compare"] = fused_compare.summary()
    if judge.disk is not None:
        result["diagnostics"]["disk"] = judge.disk.stop()
    if judge.memory is not None:
        result["diagnostics"]["memory"] = judge.memory.stop()
    if "failure" in result:
        result["failure"].setdefault("retryable", result["failure"]["kind"] == INFRA)
        for side, runner in judge.runners.items():
            result.setdefault("logs", {})[side] = str(runner.log_path)
    if profile is not None:
        profile.disable()
        profile.dump_stats(Path(os.environ["AKA_JUDGE_PROFILE"]) / f"judge-{os.getpid()}.prof")
    judge.phase("done")
    send_then_reap(judge, channel, result)
    return code


def send_then_reap(judge: Judge, channel: Channel, result: dict[str, Any]) -> None:
    """The record first, then the wait for the sides' exits (the caller may kill this process
    once it has the record: a runner dies with its judge, ``die_with_parent``)."""
    channel.send("result", result=result)
    try:
        judge.reap()
    except Exception as exc:  # the record is out: a late cleanup fault only goes to the log
        print(f"aka judge: reaping the runners failed: {type(exc).__name__}: {exc}",
              file=sys.stderr)


def _profiler() -> Any:
    """``AKA_JUDGE_PROFILE=DIR`` (set by the user for the judge alone): profile the judge's work
    into ``DIR/judge-<pid>.prof``; where an evaluation's seconds go (bench/judge_profile.py)."""
    if not os.environ.get("AKA_JUDGE_PROFILE"):
        return None
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    return profile


if __name__ == "__main__":
    # Run main() from the module imported under its own name: code that imports
    # aka_core.evaluation.judge (timing) must raise the same JudgeFailure class main() catches.
    from aka_core.evaluation.judge import main as _main

    _code = _main()
    # The record is sent and every runner is gone: skip the interpreter's and CUDA's teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)
