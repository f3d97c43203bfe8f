"""The evaluation worker: a fresh process that builds, checks and times one candidate.

Started by ``runner.evaluate`` as ``python -m aka_core.evaluation.worker FD``. It reads the
request (with the secret seed) from stdin, then reports over the pipe ``FD`` as JSON lines: the
phase it enters, wall-clock block markers, and finally the result. Candidate code may print
anything on stdout/stderr; the protocol never goes there. Seeds are derived from the secret and
the secret is dropped before any candidate code is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aka_core.errors import BuildError
from aka_core.evaluation import checking
from aka_core.evaluation.request import EvaluationRequest

WALL_BLOCK_TARGET_S = 0.1
WALL_BLOCK_MAX_CALLS = 2000
WALL_BLOCK_ROUNDS = 2


class Channel:
    def __init__(self, fd: int):
        self.stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def send(self, event: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"event": event, **fields}, default=str) + "\n")
        self.stream.flush()


def derive_seed(secret: int, *parts: object) -> int:
    digest = hashlib.blake2b(":".join([str(secret), *map(str, parts)]).encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "little") >> 1


class CandidateFailure(Exception):
    """The candidate (not the task) failed a check; ``kind`` names the gate."""

    def __init__(self, kind: str, message: str, **details: Any):
        super().__init__(message)
        self.kind = kind
        self.details = details


class Worker:
    def __init__(self, request: EvaluationRequest, channel: Channel):
        self.req = request
        self.channel = channel
        self.result: dict[str, Any] = {"phases": {}}
        self.build_facts: dict[str, dict[str, Any]] = {}
        self._phase: str | None = None
        self._phase_start = time.monotonic()
        secret = request.secret_seed
        self.case_seeds = {
            c.name: [derive_seed(secret, "check", c.name, i) for i in range(request.seeds_per_case)]
            for c in request.cases
        }
        self.timing_root = derive_seed(secret, "timing")
        self.req = _without_secret(request)

    # ------------------------------------------------------------------ phases
    def phase(self, name: str) -> None:
        now = time.monotonic()
        if self._phase is not None:
            self.result["phases"][self._phase] = round(now - self._phase_start, 4)
        self._phase, self._phase_start = name, now
        self.channel.send("phase", phase=name)

    def run(self) -> dict[str, Any]:
        self.phase("startup")
        from aka_core.host import PluginHost

        host = PluginHost()
        self.backend = host.backend(self.req.backend).factory()
        import torch

        device = self.req.device
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("a GPU was requested but torch sees none")
        self.device = device
        self.result["device"] = _asdict(self.backend.describe_device(device))
        self.phase("compile")
        if self.req.compile_only_architecture:  # until the build succeeds: nothing built
            self.result["compile_only"] = compile_only_record(self.req, built=False)
        self.load_all()
        if self.req.compile_only_architecture:
            self.result["compile_only"] = compile_only_record(self.req, built=True,
                                                              sides=self.build_facts)
            self.result["performance"] = {"measured": False,
                                          "reason_not_measured": self.result["compile_only"]["note"]}
            self.phase("done")
            return self.result
        if device == "cuda":
            # Checks and timing own the GPU: evaluations sharing it (parallel agents, a trainer's
            # workers) queue here, so no one's kernels run inside another's timed region.
            self.phase("gpu_wait")
            self._gpu_lock = acquire_gpu_lock()
        self.phase("correctness")
        self.check_correctness()
        if self.req.measure_performance and device == "cuda":
            self.phase("timing")
            self.measure()
        else:
            self.result["performance"] = {
                "measured": False,
                "reason_not_measured": (
                    "performance was not measured: no GPU (correctness ran on the CPU"
                    + (" through Triton's interpreter)" if self.req.backend == "triton" else ")")
                    if device != "cuda" else "performance measurement was switched off"
                ),
            }
        self.phase("done")
        return self.result

    # ------------------------------------------------------------------ compile
    def load_all(self) -> None:
        req = self.req
        self.make_inputs = self._load("task", req.inputs, "aka_side_task")
        self.reference = self._load("task", req.reference, "aka_side_task")
        self.baseline = self._load("baseline", req.baseline, "aka_side_baseline")
        cand_ref = req.candidate
        self.candidate = (self._load("candidate", cand_ref, "aka_side_candidate")
                          if cand_ref is not None else self.baseline)
        first = req.cases[0]
        inputs = self.make_inputs(dict(first.params), self.case_seeds[first.name][0], self.device)
        started = time.monotonic()
        self._prepare("baseline", self.baseline, inputs)
        if cand_ref is not None:
            self._prepare("candidate", self.candidate, inputs)
        self.result["compile"] = {"passed": True, "seconds": round(time.monotonic() - started, 4)}
        if self.build_facts and not req.compile_only_architecture:  # else in compile_only
            self.result["compile"]["sides"] = self.build_facts

    def _load(self, side: str, ref: Any, package: str) -> Callable[..., Any]:
        try:
            return self.backend.load_callable(Path(ref.root), ref.ref, package)
        except BuildError as exc:
            raise CandidateFailure("compile" if side == "candidate" else "task_error",
                                   f"{side} does not build: {exc.message}", file=exc.file,
                                   line=exc.line, side=side) from exc

    def _prepare(self, side: str, fn: Callable[..., Any], inputs: dict[str, Any]) -> None:
        try:
            facts = self.backend.prepare(fn, inputs)
            if isinstance(facts, Mapping):  # what the backend built, for the record
                self.build_facts[side] = dict(facts)
        except BuildError as exc:
            raise CandidateFailure("compile" if side == "candidate" else "task_error",
                                   f"{side} does not compile: {exc.message}", file=exc.file,
                                   line=exc.line, side=side) from exc
        except BaseException as exc:
            # It built but raised when run: a correctness failure, not a compile failure.
            self.prepare_error = (side, exc)
            if side == "candidate":
                raise CandidateFailure("compile_ok_runtime_error",
                                       f"candidate raised {type(exc).__name__}: {exc}",
                                       side=side, traceback=_short_tb(exc)) from exc
            raise CandidateFailure("task_error", f"baseline raised {type(exc).__name__}: {exc}",
                                   side=side, traceback=_short_tb(exc)) from exc

    # ------------------------------------------------------------------ correctness
    def check_correctness(self) -> None:
        import torch

        checks = []
        self.result["correctness"] = {"passed": False, "checks": checks}
        for case in self.req.cases:
            held_out = case.name in self.req.held_out
            for i, seed in enumerate(self.case_seeds[case.name]):
                inputs, ref, base = self._task_side(case, seed)
                snap = checking.snapshot_inputs(inputs)
                base_vs_ref = checking.compare_outputs(base, ref, self.req.tolerance)
                entry: dict[str, Any] = {"case": case.name, "seed_index": i, "held_out": held_out}
                if not base_vs_ref["passed"]:
                    raise CandidateFailure("task_error", f"the baseline does not match the "
                                           f"reference on case {case.name}: {base_vs_ref['reason']}")
                outs = []
                for poison in (0xFF, 0x3F):  # NaN pattern, then a finite pattern
                    nbytes = sum(t.numel() * t.element_size() for t in base) * 2
                    checking.poison_free_memory(self.device, nbytes, poison)
                    try:
                        out = self.candidate(**inputs)
                        if self.device == "cuda":
                            torch.cuda.synchronize()
                    except BaseException as exc:  # SystemExit too: it is the candidate's failure
                        raise CandidateFailure(
                            "correctness", f"candidate raised {type(exc).__name__}: {exc} "
                            f"(case {case.name})", case=case.name, traceback=_short_tb(exc)
                        ) from exc
                    try:
                        outs.append(checking.as_tensors(out))
                    except TypeError as exc:
                        raise CandidateFailure("correctness", f"candidate {exc}") from exc
                changed = checking.changed_inputs(inputs, snap)
                if changed:
                    raise CandidateFailure("correctness", f"candidate modified its inputs "
                                           f"{', '.join(changed)} (case {case.name})",
                                           case=case.name)
                for run_index, out in enumerate(outs):
                    mismatch = checking.structure_mismatch(out, base)
                    if mismatch:
                        raise CandidateFailure("correctness", f"{mismatch} (case {case.name})",
                                               case=case.name)
                    cmp = checking.compare_outputs(out, ref, self.req.tolerance)
                    if run_index == 0:
                        entry.update({k: cmp[k] for k in ("max_abs_err", "rel_l2") if k in cmp})
                    if not cmp["passed"]:
                        entry.update(passed=False, reason=cmp["reason"], run=run_index + 1)
                        checks.append(entry)
                        what = ("differs from the reference" if run_index == 0 else
                                "differs from the reference on a second call (uninitialised "
                                "memory or non-determinism)")
                        raise CandidateFailure("correctness", f"output {what} on case "
                                               f"{case.name}: {cmp['reason']}", case=case.name)
                entry["baseline_rel_l2"] = base_vs_ref.get("rel_l2")
                entry["passed"] = True
                checks.append(entry)
        self.result["correctness"]["passed"] = True

    def _task_side(self, case: Any, seed: int) -> tuple[dict[str, Any], list[Any], list[Any]]:
        """Inputs, reference and baseline outputs: a failure here is the task's, not the candidate's."""
        step = "the inputs factory"
        try:
            inputs = self.make_inputs(dict(case.params), seed, self.device)
            step = "the reference"
            ref = checking.as_tensors(self.reference(**inputs))
            step = "the baseline"
            base = checking.as_tensors(self.baseline(**inputs))
        except BaseException as exc:
            raise CandidateFailure("task_error", f"{step} raised {type(exc).__name__}: {exc} "
                                   f"(case {case.name})", traceback=_short_tb(exc)) from exc
        return inputs, ref, base

    # ------------------------------------------------------------------ timing
    def fresh_inputs(self, case: Any) -> Iterator[dict[str, Any]]:
        i = 0
        while True:
            yield self.make_inputs(dict(case.params), derive_seed(self.timing_root, case.name, i),
                                   self.device)
            i += 1

    def measure(self) -> None:
        from aka_core.evaluation import stats, timing

        flush = timing.L2Flusher()
        cases_out = []
        perf: dict[str, Any] = {"measured": False, "cases": cases_out}
        self.result["performance"] = perf
        tol = self.req.tolerance

        def check(cand_out: Any, base_out: Any) -> str | None:
            try:
                c, b = checking.as_tensors(cand_out), checking.as_tensors(base_out)
            except TypeError as exc:
                return str(exc)
            mismatch = checking.structure_mismatch(c, b)
            if mismatch:
                return mismatch
            # Both sides carry their own rounding error: allow twice the tolerance between them.
            cmp = checking.compare_outputs(c, b, tol, scale=2.0)
            return None if cmp["passed"] else cmp["reason"]

        for index, case in enumerate(self.req.cases):
            graphs: dict[str, list[Any]] = {}
            record = timing.time_case(
                self.baseline, self.candidate, self.fresh_inputs(case), check,
                self.req.timing, flush, order_seed=derive_seed(self.timing_root, "order", index),
                graphs=graphs,
            )
            record["case"] = case.name
            record["held_out"] = case.name in self.req.held_out
            cases_out.append(record)
            if record.get("failed"):
                raise CandidateFailure("timing_check", f"case {case.name}: {record['reason']}",
                                       case=case.name)
            self.wall_blocks(case, record, graphs)
            del graphs
            if self.req.time_reference:
                inputs = next(self.fresh_inputs(case))
                record["reference_ms"] = timing.time_alone(self.reference, inputs, flush)
        speedup, lo, hi = stats.geomean_speedup_ci(
            [(c["samples_ms"]["baseline"], c["samples_ms"]["candidate"]) for c in cases_out]
        )
        perf.update(measured=True, speedup=speedup, ci95=[lo, hi],
                    method=sorted({c["method"] for c in cases_out}),
                    description=(
                        "median of per-pair ratios per case (baseline and candidate interleaved in "
                        "random order on the same fresh inputs, L2 flushed, device events), "
                        "geometric mean over cases, percentile bootstrap 95% CI"))

    def wall_blocks(self, case: Any, record: dict[str, Any],
                    graphs: dict[str, list[Any]] | None = None) -> None:
        """Back-to-back blocks of each side, timed by the parent's clock (see runner).

        A case timed with CUDA graphs replays the same graphs here (a unit is one replay of
        ``graph_launches`` calls): plain calls of microsecond kernels would time the host's
        launch overhead, not the kernels, and compare nothing the timing measured.
        """
        from aka_core.evaluation import timing

        per_unit = 1
        if graphs:
            per_unit = record.get("graph_launches", 1)
            inputs: dict[str, Any] = {}
            replay = {side: _cycling(graphs[side]) for side in ("baseline", "candidate")}
            fns = {side: (lambda r=replay[side]: next(r).run()) for side in replay}
        else:
            inputs = next(self.fresh_inputs(case))
            fns = {"baseline": self.baseline, "candidate": self.candidate}
        sides = (("baseline", fns["baseline"], record["baseline_median_ms"] * per_unit),
                 ("candidate", fns["candidate"], record["candidate_median_ms"] * per_unit))
        # Two rounds, alternating sides: the parent keeps each side's faster block, since a busy
        # host can only delay the parent's reading of a marker, never hasten it.
        for block in range(WALL_BLOCK_ROUNDS):
            for side, fn, median_ms in sides:
                calls = int(min(WALL_BLOCK_MAX_CALLS,
                                max(3, WALL_BLOCK_TARGET_S * 1000 / max(median_ms, 1e-3))))
                self.channel.send("wall_block", marker="start", case=case.name, side=side,
                                  calls=calls, block=block, per_call=per_unit)
                timing.run_block(fn, inputs, calls)
                self.channel.send("wall_block", marker="end", case=case.name, side=side,
                                  calls=calls, block=block, per_call=per_unit)


def _cycling(items: list[Any]) -> Iterator[Any]:
    while True:
        yield from items


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


def gpu_lock_path() -> Path:
    import tempfile

    import torch

    props = torch.cuda.get_device_properties(0)
    ident = str(getattr(props, "uuid", "") or os.environ.get("CUDA_VISIBLE_DEVICES", "0"))
    ident = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in ident)
    # The same default as the docker executor mounts into its containers: local and containerised
    # evaluations on one host queue on the same lock.
    folder = Path(os.environ.get("AKA_GPU_LOCK_DIR") or Path(tempfile.gettempdir(), "aka-gpu-locks"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"aka-gpu-{ident}.lock"


def acquire_gpu_lock() -> Any:
    """An exclusive lock on this GPU, held until the worker exits (the kernel releases it)."""
    import fcntl

    handle = open(gpu_lock_path(), "a+")  # noqa: SIM115 - held for the life of the process
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    return handle


def _without_secret(request: EvaluationRequest) -> EvaluationRequest:
    import attrs

    return attrs.evolve(request, secret_seed=0)


def _asdict(obj: Any) -> dict[str, Any]:
    import attrs

    return attrs.asdict(obj)


def _short_tb(exc: BaseException, limit: int = 6) -> str:
    return "".join(traceback.format_exception(exc, limit=-limit))[-3000:]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    channel = Channel(int(argv[0]))
    request = EvaluationRequest.from_json(json.loads(sys.stdin.read()))
    sys.stdin.close()
    worker = Worker(request, channel)
    del request
    try:
        result = worker.run()
        channel.send("result", result=result)
        return 0
    except CandidateFailure as exc:
        phase = worker._phase
        worker.phase("done")
        worker.result["failure"] = {"kind": exc.kind, "message": str(exc), "phase": phase,
                                    **exc.details}
        channel.send("result", result=worker.result)
        return 0
    except BaseException as exc:
        phase = worker._phase
        worker.phase("done")
        worker.result["failure"] = {"kind": "error", "phase": phase,
                                    "message": f"{type(exc).__name__}: {exc}",
                                    "traceback": _short_tb(exc, 12)}
        channel.send("result", result=worker.result)
        return 3


if __name__ == "__main__":
    sys.exit(main())
