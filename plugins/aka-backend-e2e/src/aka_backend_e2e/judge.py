"""The e2e judge: the format's own judge (``TaskFormatSpec.judge``), run in aka's process.

One evaluation, in order, each step gating the next:

1. **Setup** (the evaluator's): the workload is read from the preserved copy of the task and
   checked against its lock (a mismatch is a ``task_error``); the builtin model's weights are
   generated or taken from the cache and must have the workload's digest; the two kernel trees
   are assembled in a folder of the judge's: the baseline's from the task, the candidate's from
   the task with the candidate's editable files (and any new files it added to the tree) over it.
2. **Compile**: one confined engine per arm loads its tree (an import error or a missing
   entrypoint is the candidate's ``compile`` failure, the baseline's ``task_error``), and must
   report the digest of the tree the judge gave it and prove it called every declared entrypoint.
3. **Correctness**: the operator oracle (``oracle.operator_cases``) sends inputs for every
   entrypoint of the editable modules to each engine and compares the outputs with the FP32
   references in this process; then both engines generate greedy sequences for the correctness
   prompts, which the FP32 reference model (same weights) scores token by token. The candidate's
   regret must stay within ``max(max_regret, 2 x the baseline's)`` (and the same for the mean).
   With held-out on, the oracle's inputs come from a secret seed; the prompts' tokens always
   come from a secret of the evaluation (``prompt_key``; lengths from the workload's seeds).
4. **Timing** (``measure.run_case``): per case, alternating pairs of fresh engines serve the
   case's fixed work, the judge's client keeping at most ``max_concurrency`` requests in
   flight; count checks on every run; a sample of every timed run's sequences is
   scored by the FP32 reference (the same bounds). The speedup is the geometric mean over cases
   of the median paired throughput ratio, with its CI; a case's p99 TPOT limit is a gate.
   On the CPU the timing runs too but is a diagnostic (``performance.cpu_diagnostic``), never
   measured for the score: CPU results are never paid, as for operator tasks.

Faults of the evaluator or the host are ``infra_error`` (retryable), of the task ``task_error``,
of the candidate its kinds (``compile``, ``correctness``, ``crashed``, ``timeout``, ``protocol``,
``timing_check``, ``policy``). Nothing the engines say about time or correctness is believed.
"""

from __future__ import annotations

import importlib.util
import math
import os
import random
import secrets
import shutil
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from aka_backend_e2e.adapters.base import (
    ARMS,
    EngineFailure,
    EngineProtocolError,
    EngineSetupError,
    Request,
    RunResult,
)
from aka_backend_e2e.kernels_api import ENTRYPOINTS
from aka_backend_e2e.workload import (
    LOCK_FILE,
    Workload,
    WorkloadCase,
    builtin_weights,
    check_lock,
    load_workload,
)
from aka_core.plugin import ConfigError, FailureKind, JudgeRequest, bounded_files

if TYPE_CHECKING:
    import torch

    from aka_backend_e2e.model import ModelConfig

log = structlog.get_logger("aka.e2e")

MAX_TREE_BYTES = 64 * 2**20
"""The most a candidate's kernel tree may hold (files it added included)."""
CORRECTNESS_SLOTS = 16
CANARY_TREE = Path(__file__).resolve().parent / "canary_kernels"
"""The most sequences a correctness engine serves at once."""
QUICK = {"min_pairs": 1, "max_pairs": 1}
"""An advisory evaluation (``aka selfcheck``) times one pair per case."""
METHOD = "e2e_throughput"


class JudgeFailure(Exception):
    """Ends an evaluation with ``record["failure"]``."""

    def __init__(self, kind: str, phase: str, message: str, **details: Any):
        super().__init__(message)
        self.kind, self.phase, self.message, self.details = kind, phase, message, details

    def to_failure(self) -> dict[str, Any]:
        return {"kind": self.kind, "phase": self.phase, "message": self.message,
                "retryable": self.kind == FailureKind.INFRA_ERROR, **self.details}


TREE_DEPTH_LIMIT = 32
TREE_ENTRY_LIMIT = 20_000


def candidate_files(workspace: Path, tree: str) -> dict[str, int]:
    """The regular files of the candidate's kernel tree (``workspace/tree``) by path in the tree,
    with their sizes. Nothing is followed through a link: a link where the task has the tree
    (or a folder on its way) is the candidate's ``compile`` failure, and files below a link in
    the tree are not the candidate's (the judge would copy whatever the link reaches into a
    tree its engine reads). The walk is iterative and capped; beyond a cap is the candidate's
    failure too."""
    folder = workspace
    for part in tree.split("/"):
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise JudgeFailure(FailureKind.COMPILE, "setup", f"the candidate's "
                               f"{folder.relative_to(workspace)} is a link or a file where the task "
                               "has a folder: ship the kernel tree as real files in the task's "
                               "folders")
    if not folder.is_dir():
        return {}
    found: dict[str, int] = {}
    pending, entries = [""], 0
    while pending:
        rel_dir = pending.pop()
        for entry in _listing(folder, rel_dir, tree):
            entries += 1
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entries > TREE_ENTRY_LIMIT or rel.count("/") >= TREE_DEPTH_LIMIT:
                raise JudgeFailure(FailureKind.COMPILE, "setup", f"the candidate's kernel tree "
                                   f"{tree}/ holds more than {TREE_ENTRY_LIMIT} entries or folders "
                                   f"nested deeper than {TREE_DEPTH_LIMIT} (at {rel[:200]!r}): "
                                   "keep it smaller")
            if entry.is_dir(follow_symlinks=False):
                pending.append(rel)
            elif entry.is_file(follow_symlinks=False):
                found[rel] = entry.stat(follow_symlinks=False).st_size
    return found


def _listing(folder: Path, rel_dir: str, tree: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder / rel_dir if rel_dir else folder) as listing:
            return list(listing)
    except OSError as exc:
        raise JudgeFailure(FailureKind.COMPILE, "setup", f"the candidate's folder "
                           f"{tree}/{rel_dir} cannot be read ({exc.strerror}): leave the kernel "
                           "tree readable") from None


def _copy_regular(src: Path, dst: Path, size: int) -> None:
    """Copy the candidate's regular file ``src``, still of the ``size`` its listing saw (never
    through a link, never a FIFO or a device, never more); one it made unreadable, or changed
    since, is its own ``compile`` failure."""
    try:
        data = bounded_files.read_exactly(src, size)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise JudgeFailure(FailureKind.COMPILE, "setup", f"the candidate's file {src} "
                           f"cannot be read ({reason}): leave the kernel tree readable"
                           ) from None
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)


class E2EJudge:
    """``evaluate(JudgeRequest) -> record`` (``aka_core.plugin.records.TaskJudge``)."""

    def evaluate(self, request: JudgeRequest) -> dict[str, Any]:
        return Evaluation(request).run()


class Evaluation:
    """One evaluation's state and record."""

    def __init__(self, request: JudgeRequest):
        self.req = request
        self.record: dict[str, Any] = {
            "judge": "e2e", "phases": {},
            "confinement": {"policy": request.confinement, "confined": True, "sides": {}},
            "e2e": {"arms": {}},
        }
        self.scratch: Path | None = None
        self.trees: dict[str, Path] = {}
        self.workload: Workload | None = None
        self.config: ModelConfig | None = None
        self.weights: dict[str, torch.Tensor] | None = None
        self.weights_path: Path | None = None
        self.weights_digest: str | None = None
        # The held-out secret (the operator oracle's inputs); 128 bits when drawn here, so that
        # no engine can search for it from what it is sent.
        self.secret = (request.held_out_seed if request.held_out_seed is not None
                       else secrets.randbits(128)) if request.held_out else None
        # Every prompt's tokens (correctness, warm-up, timed) come from this key: the held-out
        # secret, or a fresh one when held-out is off. The agent knows the weights and the
        # workload, so prompts it could know would let it emit greedy outputs it computed ahead.
        # It is never sent to an engine (only the prompts are), nor put in its environment.
        self.prompt_key = (str(self.secret) if self.secret is not None
                           else secrets.token_hex(16))
        self.allowance: dict[str, float] = {}
        self._phase: str | None = None
        self._phase_started = time.monotonic()
        self._log = request.logs / "evaluation.log"

    # ------------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        try:
            self.phase("setup")
            self.setup()
            self.phase("compile")
            engines = self.start_engines()
            try:
                self.phase("correctness")
                self.check_correctness(engines)
            finally:
                for run in engines.values():
                    run.stop()
            self.phase("timing")
            self.measure()
        except JudgeFailure as exc:
            self.record["failure"] = exc.to_failure()
        except EngineFailure as exc:
            failure = exc.to_failure()
            if self._phase == "timing":
                # The core's gates know the judge's phases, not the engine's steps: a timed
                # run's crash, hang or protocol violation makes the timing unsound (never an
                # accepted candidate with its timing missing).
                failure["engine_phase"], failure["phase"] = failure.get("phase"), "timing"
            self.record["failure"] = failure
        except EngineSetupError as exc:
            self.record["failure"] = exc.to_failure()
        except Exception as exc:  # the judge's own fault: never the candidate's
            self.record["failure"] = {
                "kind": FailureKind.INFRA_ERROR, "phase": self._phase or "setup", "retryable": True,
                "message": f"the e2e judge failed: {type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:]}
        finally:
            self.phase(None)
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
        failure = self.record.get("failure")
        if failure:
            self.note(f"failure ({failure['kind']}, {failure.get('phase')}): "
                      f"{failure['message']}")
        else:
            self.note("done")
        return self.record

    def phase(self, name: str | None) -> None:
        now = time.monotonic()
        if self._phase is not None:
            phases = self.record["phases"]
            phases[self._phase] = round(phases.get(self._phase, 0.0) + now - self._phase_started,
                                        3)
        self._phase, self._phase_started = name, now
        if name is not None:
            self.note(f"phase {name}")

    def note(self, text: str) -> None:
        log.debug(text)
        try:
            with self._log.open("a", encoding="utf-8") as handle:
                handle.write(f"{time.strftime('%H:%M:%S')} {text}\n")
        except OSError:
            pass

    # ------------------------------------------------------------------ 1. setup
    def setup(self) -> None:
        req = self.req
        try:
            workload = load_workload(req.baseline)
            check_lock(req.baseline, workload)
        except ConfigError as exc:
            raise JudgeFailure(FailureKind.TASK_ERROR, "setup", str(exc)) from None
        self.workload = workload
        self.record["device"] = self.describe_device()
        self.record["e2e"].update(
            engine=workload.engine, model=workload.model_label, workload_digest=workload.digest,
            weights_digest=workload.weights_digest, lock=f"{LOCK_FILE} matches",
            entrypoints=list(workload.kernels.entrypoints), editable=list(req.task.editable),
            correctness_seed="secret" if self.secret is not None else workload.correctness.seed,
            prompts="secret")
        if workload.engine != "builtin":
            raise JudgeFailure(FailureKind.INFRA_ERROR, "setup", f"the {workload.engine} engine is not "
                               "supported by this judge yet: only the builtin engine is")
        from aka_backend_e2e.model import config_by_name
        from aka_backend_e2e.weights import WeightsError, read_weights, same_digest

        assert workload.model.config is not None
        self.config = config_by_name(workload.model.config)
        try:
            path, digest = builtin_weights(workload.model.config, workload.model.seed)
        except (ConfigError, OSError) as exc:
            raise JudgeFailure(FailureKind.INFRA_ERROR, "setup", f"cannot make the model's weights: {exc}"
                               ) from None
        if workload.weights_digest is None or not same_digest(digest, workload.weights_digest):
            raise JudgeFailure(
                FailureKind.INFRA_ERROR, "setup", f"the weights generated here ({path}) have digest "
                f"{digest}, the workload pins {workload.weights_digest}: this host cannot "
                "reproduce the task's model (delete the cached file to generate it again)",
                retryable=False)
        try:
            self.weights, _ = read_weights(path, digest)
        except (OSError, WeightsError) as exc:
            raise JudgeFailure(FailureKind.INFRA_ERROR, "setup", f"cannot read the weights: {exc}"
                               ) from None
        self.weights_path, self.weights_digest = path, digest
        self.build_trees()

    def describe_device(self) -> dict[str, Any]:
        from aka_backend_e2e.backend import E2EBackend
        from aka_core.plugin import unstructure

        info: dict[str, Any] = unstructure(E2EBackend().describe_device(self.req.device))
        return info

    def build_trees(self) -> None:
        """The two arms' kernel trees, in a folder of the judge's (out of the run folder, which
        the engines may not read): the baseline's as the task ships it; the candidate's the same
        with the candidate's editable files, and the files it added to the tree, over it."""
        assert self.workload is not None
        tree = self.workload.kernels.tree
        source = self.req.baseline / tree
        self.scratch = Path(tempfile.mkdtemp(prefix="aka-e2e-judge-"))
        base = self.scratch / "baseline"
        shutil.copytree(source, base, ignore=shutil.ignore_patterns("__pycache__"))
        cand = self.scratch / "candidate"
        shutil.copytree(source, cand, ignore=shutil.ignore_patterns("__pycache__"))
        for path in [base, cand, *base.rglob("*"), *cand.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o200)
        self.trees = {"baseline": base, "candidate": cand}
        if self.req.workspace is None:  # the baseline against itself
            return
        editable = {rel.removeprefix(f"{tree}/") for rel in self.req.task.editable}
        found = candidate_files(self.req.workspace, tree)
        total = sum(size for rel, size in found.items() if rel in editable)
        added = sorted(rel for rel in found if rel not in editable
                       and "__pycache__" not in rel.split("/") and not (source / rel).exists())
        total += sum(found[rel] for rel in added)
        if total > MAX_TREE_BYTES:
            raise JudgeFailure(FailureKind.COMPILE, "setup", f"the candidate's kernel tree holds "
                               f"more than {MAX_TREE_BYTES >> 20} MiB")
        workspace_tree = self.req.workspace / tree
        for rel in sorted(editable):
            if rel not in found:  # missing, a link, or below a link: not the candidate's file
                (cand / rel).unlink(missing_ok=True)  # its import then fails: the candidate's fault
                continue
            _copy_regular(workspace_tree / rel, cand / rel, found[rel])
        for rel in added:
            _copy_regular(workspace_tree / rel, cand / rel, found[rel])
        added = [f"{tree}/{rel}" for rel in added]
        self.record["e2e"]["added_files"] = added

    # ------------------------------------------------------------------ engines
    def adapter(self) -> Any:
        from aka_backend_e2e.adapters.builtin import BuiltinAdapter

        assert self.weights_path is not None
        protected = [*self.req.protected, str(self.req.baseline)]
        if self.req.workspace is not None:
            protected.append(str(self.req.workspace))
        return BuiltinAdapter(weights=self.weights_path, weights_digest=self.weights_digest,
                              device=self.req.device, protected=protected,
                              confinement=self.req.confinement)

    def start_engines(self) -> dict[str, Any]:
        """One engine per arm for the correctness checks, started at once. A baseline that does
        not start is the evaluator's fault whatever the candidate did, so its failure is the one
        reported when both fail."""
        from concurrent.futures import ThreadPoolExecutor

        from aka_backend_e2e.kernels_api import tree_digest

        assert self.workload is not None
        corr = self.workload.correctness
        case = WorkloadCase(name="correctness", input_len=corr.input_len,
                            output_len=(corr.output_len, corr.output_len),
                            requests=corr.prompts,
                            max_concurrency=min(corr.prompts, CORRECTNESS_SLOTS),
                            warmup_requests=0)
        adapter = self.adapter()
        logs = self.req.logs / "e2e" / "correctness"
        with ThreadPoolExecutor(max_workers=len(ARMS), thread_name_prefix="aka-e2e-start") as pool:
            futures = {arm: pool.submit(adapter.start, arm, self.trees[arm], self.workload, case,
                                        logs) for arm in ARMS}
            started: dict[str, Any] = {}
            failed: dict[str, BaseException] = {}
            for arm, future in futures.items():
                try:
                    started[arm] = future.result()
                except BaseException as exc:  # re-raised below, after cleanup
                    failed[arm] = exc
        try:
            if "candidate" in failed and "baseline" not in failed:
                fault = self.toolchain_fault(adapter, case, logs, failed["candidate"])
                if fault:
                    raise EngineSetupError(fault, arm="candidate", phase="compile")
            if failed:
                raise failed.get("baseline") or failed["candidate"]
            for arm in ARMS:
                self.account(arm, started[arm].info, tree_digest(self.trees[arm]))
        except BaseException:
            for run in started.values():
                run.stop()
            raise
        self.record["compile"] = {"passed": True, "sides": {
            arm: {"kernel_digest": started[arm].info.get("kernel_digest"),
                  "load_s": started[arm].info.get("load_s")} for arm in ARMS}}
        return started

    def toolchain_fault(self, adapter: Any, case: WorkloadCase, logs: Path,
                        exc: BaseException) -> str | None:
        """Why a candidate engine's build or warm-up failure is the evaluator's, or None: the
        baseline tree is plain PyTorch, so nothing else shows that Triton and its compiler work
        in an engine's sandbox. A control engine (the baseline tree with a known-good Triton
        kernel over it) that fails too puts the fault on the toolchain (seen on a GPU: a
        compiler without its scratch folder), never on the candidate."""
        from aka_backend_e2e.adapters.base import EngineCrashed, KernelLoadFailed

        if not isinstance(exc, EngineCrashed | KernelLoadFailed) or importlib.util.find_spec(
                "triton") is None:
            return None
        control = self.scratch / "control" if self.scratch else None
        if control is None:
            return None
        shutil.copytree(self.trees["baseline"], control)
        shutil.copyfile(CANARY_TREE / "activation.py", control / "activation.py")
        try:
            run = adapter.start("baseline", control, self.workload, case, logs / "control")
        except (EngineFailure, EngineSetupError) as control_exc:
            self.record["e2e"]["toolchain_control"] = {"passed": False,
                                                       "message": str(control_exc)[:2000]}
            return (f"the candidate's engine failed ({exc}), and so did a control engine with a "
                    f"known-good Triton kernel ({control_exc}): the toolchain is at fault; "
                    "evaluate again once it works")
        run.stop()
        self.record["e2e"]["toolchain_control"] = {"passed": True}
        return None

    def account(self, arm: str, info: Mapping[str, Any], digest: str) -> None:
        """Keep what an engine reported at load; it must have loaded the tree it was given."""
        reported = info.get("kernel_digest")
        if reported != digest:
            raise EngineProtocolError(f"reported kernel digest {reported}, but its tree's is "
                                      f"{digest}", arm=arm, phase="load")
        arms = self.record["e2e"]["arms"]
        arms[arm] = {"kernel_digest": digest, "entrypoints_called": info.get("entrypoints_called"),
                     "log": info.get("log")}
        confinement = info.get("confinement")
        whole = self.record["confinement"]
        if isinstance(confinement, dict):
            whole["sides"][arm] = confinement
            whole["confined"] = bool(whole["confined"]) and bool(confinement.get("confined"))
        else:
            whole["confined"] = False

    # ------------------------------------------------------------------ 3. correctness
    def check_correctness(self, engines: Mapping[str, Any]) -> None:
        checks: list[dict[str, Any]] = []
        self.record["correctness"] = {"passed": False, "checks": checks}
        self.operator_oracle(engines, checks)
        self.model_oracle(engines, checks)
        self.record["correctness"]["passed"] = True

    def operator_oracle(self, engines: Mapping[str, Any], checks: list[dict[str, Any]]) -> None:
        from aka_backend_e2e import oracle
        from aka_backend_e2e.tensors import TensorFormatError, decode_tensor, encode_value

        assert self.workload is not None and self.config is not None
        tree = self.workload.kernels.tree
        names = [n for n, module in ENTRYPOINTS.items()
                 if f"{tree}/{module}" in self.req.task.editable]
        seed = self.secret if self.secret is not None else self.workload.correctness.seed
        held = self.secret is not None
        worst: dict[str, dict[str, float]] = {arm: {} for arm in ARMS}
        for name in names:
            for case in oracle.operator_cases(name, self.config, seed):
                expected = oracle.reference_outputs(case)
                args = [encode_value(a) for a in case.args]
                for arm in ARMS:
                    reply = engines[arm].check(name, args)
                    if not reply.get("ok"):
                        verdict = oracle.OperatorVerdict(
                            False, f"{name}[{case.name}]: raised: "
                                   f"{str(reply.get('error'))[:1500]}", math.inf)
                    else:
                        try:
                            outputs = reply.get("outputs") or []
                            if not isinstance(outputs, list):  # a forged reply: never the judge's
                                raise TensorFormatError(f"outputs is a {type(outputs).__name__}, "
                                                        "not a list of tensors")
                            actual = [decode_tensor(t) for t in outputs]
                        except (TensorFormatError, TypeError, ValueError, KeyError,
                                AttributeError) as exc:
                            raise EngineProtocolError(f"sent a malformed output for {name}: "
                                                      f"{exc}", arm=arm,
                                                      phase="correctness") from None
                        verdict = oracle.compare_outputs(case, expected, actual)
                    worst[arm][name] = max(worst[arm].get(name, 0.0), verdict.worst)
                    if arm == "candidate":
                        checks.append({"case": f"operator:{name}[{case.name}]",
                                       "passed": verdict.passed, "worst": verdict.worst,
                                       "held_out": held})
                    if not verdict.passed:
                        self.record["e2e"]["oracle"] = {"operator": worst}
                        if arm == "baseline":
                            raise JudgeFailure(FailureKind.TASK_ERROR, "correctness", "the task's own "
                                               f"kernels fail the operator oracle: "
                                               f"{verdict.message}")
                        raise JudgeFailure(FailureKind.CORRECTNESS, "correctness", verdict.message,
                                           entrypoint=name, case=case.name)
        self.record["e2e"]["oracle"] = {"operator": worst}

    def correctness_requests(self) -> list[Request]:
        """The model oracle's prompts: lengths from the workload's seed (the same work in every
        evaluation), tokens from the evaluation's prompt key (``measure.prompt_tokens``)."""
        from aka_backend_e2e.measure import prompt_tokens

        assert self.workload is not None and self.config is not None
        corr = self.workload.correctness
        rng = random.Random(f"aka-e2e-correctness:{corr.seed}")
        return [Request(id=f"check-{i}",
                        prompt=prompt_tokens(self.prompt_key, "correctness", i,
                                             rng.randint(*corr.input_len), self.config.vocab),
                        max_tokens=corr.output_len)
                for i in range(corr.prompts)]

    def model_oracle(self, engines: Mapping[str, Any], checks: list[dict[str, Any]]) -> None:
        from aka_backend_e2e.measure import check_counts

        assert self.workload is not None
        corr = self.workload.correctness
        requests = self.correctness_requests()
        slots = min(corr.prompts, CORRECTNESS_SLOTS)
        scored: dict[str, dict[str, Any]] = {}
        for arm in ARMS:
            result = engines[arm].generate(requests, math.inf, max_concurrency=slots)
            check_counts(result, requests, phase="correctness", max_concurrency=slots)
            scored[arm] = self.score(arm, requests, result)
        base = scored["baseline"]
        self.allowance = {"max_regret": max(corr.max_regret, 2 * base["max_regret"]),
                          "mean_regret": max(corr.max_mean_regret, 2 * base["mean_regret"])}
        model = {"baseline": base, "candidate": scored["candidate"],
                 "allowance": dict(self.allowance), "prompts": len(requests),
                 "output_len": corr.output_len}
        self.record["e2e"].setdefault("oracle", {})["model"] = model
        passed, why = self.within_allowance(scored["candidate"])
        checks.append({"case": "model", "passed": passed,
                       "held_out": self.secret is not None,
                       "max_regret": scored["candidate"]["max_regret"],
                       "mean_regret": scored["candidate"]["mean_regret"]})
        if not passed:
            raise JudgeFailure(FailureKind.CORRECTNESS, "correctness", "the model served with the "
                               f"candidate's kernels generates wrong tokens: {why}")

    def score(self, arm: str, requests: Sequence[Request], result: RunResult,
              only: Sequence[str] | None = None) -> dict[str, Any]:
        """The FP32 reference's verdict on ``result``'s sequences (``only``: those ids)."""
        from aka_backend_e2e import oracle

        assert self.config is not None and self.weights is not None
        wanted = [r for r in requests if only is None or r.id in only]
        triples = [(list(r.prompt), result.requests[r.id].tokens,
                    result.requests[r.id].logprobs) for r in wanted]
        try:
            scores = oracle.score_sequences(self.config, self.weights, triples,
                                            device=self.req.device)
        except ValueError as exc:  # malformed tokens
            raise EngineProtocolError(f"sent sequences the reference cannot score: {exc}",
                                      arm=arm, phase=self._phase or "") from None
        return oracle.summarize(scores)

    def within_allowance(self, summary: Mapping[str, Any]) -> tuple[bool, str]:
        a = self.allowance
        if summary["max_regret"] > a["max_regret"]:
            return False, (f"max regret {summary['max_regret']:.4g} nats exceeds "
                           f"{a['max_regret']:.4g} (the workload's bound, or twice the "
                           "baseline's own)")
        if summary["mean_regret"] > a["mean_regret"]:
            return False, (f"mean regret {summary['mean_regret']:.4g} nats exceeds "
                           f"{a['mean_regret']:.4g} (the workload's bound, or twice the "
                           "baseline's own)")
        return True, ""

    # ------------------------------------------------------------------ 4. timing
    def measure(self) -> None:
        req = self.req
        if not req.measure_performance:
            self.record["performance"] = {"measured": False, "reason_not_measured":
                                          "performance measurement was switched off"}
            return
        from aka_backend_e2e import measure
        from aka_backend_e2e.adapters.base import RunSpec

        assert self.workload is not None and self.config is not None
        bounds = self.workload.measurement
        pairs = dict(min_pairs=bounds.min_pairs, max_pairs=bounds.max_pairs)
        if req.quick:
            pairs = dict(QUICK)
        deadline = time.monotonic() + bounds.max_seconds
        spec = RunSpec(workload=self.workload, kernels=dict(self.trees),
                       log_dir=req.logs / "e2e" / "timing")
        adapter = self.adapter()
        results, audits = [], {}
        for case in self.workload.cases:
            audit = Audit(self, case)
            result = measure.run_case(adapter, spec, case, aa_floor=bounds.aa_floor,
                                      vocab_size=self.config.vocab, deadline=deadline,
                                      prompt_key=self.prompt_key, on_run=audit, **pairs)
            audits[case.name] = audit.verdict()
            results.append(result)
        summary = measure.summarize_cases(results, seed=0)
        cases = [{"case": c.case, "baseline_median_ms": c.baseline_ms_per_token,
                  "candidate_median_ms": c.candidate_ms_per_token, "speedup": c.ratio,
                  "ci95": list(c.ci95), "pairs": len(c.pairs), "spread": c.spread,
                  "aa_floor": c.aa_floor, "aa_ratios": list(c.aa_ratios), "stopped": c.stopped,
                  "p99_tpot": c.tpot, "method": METHOD} for c in results]
        timing = {"speedup": summary.speedup, "ci95": list(summary.ci95), "cases": cases,
                  "method": [METHOD], "unit": "ms per output token (1000 / throughput)",
                  "description": "a fresh engine per run serving the case's fixed work; "
                                 "alternating baseline/candidate pairs; speedup = geometric mean "
                                 "over cases of the median paired throughput ratio"}
        self.record["e2e"]["pairs"] = {c.case: [p.to_json() for p in c.pairs] for c in results}
        self.record["e2e"]["audits"] = audits
        self.record["e2e"]["tpot"] = {c.case: c.tpot for c in results}
        if req.device == "cuda":
            self.record["performance"] = {"measured": True, **timing}
            self.record["wall_clock_check"] = True
        else:
            self.record["performance"] = {
                "measured": False, "cpu_diagnostic": timing,
                "reason_not_measured": "performance was not measured: no GPU (the engines ran "
                                       "on the CPU; their timing, under cpu_diagnostic, is a CPU "
                                       "measurement and never scored)"}
        failing = [c for c in results if c.tpot["passed"] is False]
        if failing:
            c = failing[0]
            raise JudgeFailure(FailureKind.POLICY, "timing", f"case {c.case}: the candidate's p99 time per "
                               f"output token {c.tpot['candidate_p99_ms']:.3f} ms exceeds the "
                               f"workload's limit {c.tpot['limit_ms']} ms")


class Audit:
    """``measure.run_case``'s ``on_run``: scores a sample of every timed run's sequences with the
    FP32 reference; at the end of the case the candidate's must be within the allowance, which
    is at least twice the baseline's own on the same work."""

    def __init__(self, evaluation: Evaluation, case: WorkloadCase):
        self.ev, self.case = evaluation, case
        assert evaluation.workload is not None
        self.sample = evaluation.workload.correctness.audit_sequences
        # Which sequences are audited is secret whether held-out is on or not: a candidate that
        # knew it would compute only those.
        self.rng = random.Random(f"aka-e2e-audit:{evaluation.prompt_key}:{case.name}")
        self.scores: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}

    def __call__(self, arm: str, pair: int, requests: Sequence[Request],
                 result: RunResult) -> None:
        if self.sample <= 0:
            return
        ids = [r.id for r in requests]
        chosen = self.rng.sample(ids, min(self.sample, len(ids)))
        self.scores[arm].append(self.ev.score(arm, requests, result, only=chosen))

    def verdict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sampled_per_run": self.sample}
        for arm in ARMS:
            runs = self.scores[arm]
            out[arm] = {"runs": len(runs),
                        "max_regret": max((s["max_regret"] for s in runs), default=0.0),
                        "mean_regret": max((s["mean_regret"] for s in runs), default=0.0)}
        corr = self.ev.workload.correctness if self.ev.workload else None
        assert corr is not None
        base = out["baseline"]
        allowance = {"max_regret": max(self.ev.allowance.get("max_regret", corr.max_regret),
                                       2 * base["max_regret"]),
                     "mean_regret": max(self.ev.allowance.get("mean_regret",
                                                              corr.max_mean_regret),
                                        2 * base["mean_regret"])}
        out["allowance"] = allowance
        cand = out["candidate"]
        for key in ("max_regret", "mean_regret"):
            if cand[key] > allowance[key]:
                raise JudgeFailure(FailureKind.CORRECTNESS, "timing", f"case {self.case.name}: the "
                                   f"candidate's timed runs generate wrong tokens: {key} "
                                   f"{cand[key]:.4g} nats exceeds {allowance[key]:.4g}",
                                   audit=out)
        return out

