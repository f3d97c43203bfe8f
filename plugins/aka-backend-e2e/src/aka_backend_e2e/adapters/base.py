"""The interface every serving engine is driven through, and what one timed run returns.

An ``EngineAdapter`` starts a fresh engine for one arm (``baseline`` or ``candidate``) with that
arm's kernel tree; the ``EngineRun`` it returns serves requests and reports, per request, every
token with the judge's own timestamps (``time.perf_counter`` in the judge's process, taken when
the judge read the token). Those timestamps are the measurement; whatever timings an engine
reports are diagnostics.

Failures are typed. An ``EngineFailure`` (a crash, a timeout, a protocol violation, a kernel tree
that does not load, a changed setting, a failed count check) is the candidate's fault on the
candidate arm and the evaluator's on the baseline arm (``failure_kind``); an ``EngineSetupError``
(the engine is not installed, a port or a folder is unusable, confinement is unavailable) is the
evaluator's or the host's whatever the arm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

import attrs

from aka_core.plugin import FailureKind

ARMS = ("baseline", "candidate")
INFRA = FailureKind.INFRA_ERROR


@attrs.frozen
class Request:
    """One request: a prompt of token ids and exactly ``max_tokens`` tokens to generate."""

    id: str
    prompt: tuple[int, ...] = attrs.field(converter=tuple)
    max_tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "prompt": list(self.prompt), "max_tokens": self.max_tokens}


@attrs.define
class RequestResult:
    """What the judge saw of one request. Times are ``time.perf_counter`` of the judge."""

    id: str
    expected_tokens: int
    sent: float | None = None
    tokens: list[int] = attrs.field(factory=list)
    logprobs: list[float] = attrs.field(factory=list)
    token_times: list[float] = attrs.field(factory=list)
    """When the judge read each token (tokens read together share a time)."""
    completed: float | None = None
    """When the engine said the request finished (``None``: it never did)."""
    error: str | None = None
    """Why the request did not complete (a dropped connection, an HTTP status)."""

    @property
    def first_token(self) -> float | None:
        return self.token_times[0] if self.token_times else None

    def add(self, token: int, logprob: float, at: float) -> None:
        self.tokens.append(token)
        self.logprobs.append(logprob)
        self.token_times.append(at)


@attrs.define
class RunResult:
    """One ``generate`` of one engine run: every request's tokens and the judge's timestamps."""

    arm: str
    requests: dict[str, RequestResult]
    start: float
    """When the judge sent the first request."""
    end: float
    """When the judge read the last line of the run."""
    info: dict[str, Any] = attrs.field(factory=dict)
    """Diagnostics (the engine's own timings, its confinement, the kernel digest it reported)."""

    @property
    def sent(self) -> int:
        return sum(1 for r in self.requests.values() if r.sent is not None)

    @property
    def completed(self) -> int:
        return sum(1 for r in self.requests.values() if r.completed is not None)

    @property
    def tokens_expected(self) -> int:
        return sum(r.expected_tokens for r in self.requests.values())

    @property
    def tokens_received(self) -> int:
        return sum(len(r.tokens) for r in self.requests.values())


class EngineRun(Protocol):
    """A started engine, serving one arm's kernel tree."""

    arm: str
    info: dict[str, Any]
    """What the engine reported at start (confinement, kernel digest, entrypoints called, its
    log's path): diagnostics for the record."""

    def generate(self, requests: Sequence[Request], rate: float, *, seed: int = 0,
                 max_concurrency: int | None = None) -> RunResult:
        """Send ``requests`` at ``rate`` per second by the judge's clock (``inf``: all at once;
        else Poisson arrivals drawn from ``seed``), never more than ``max_concurrency`` of them
        in flight (a request due while that many are in flight waits in the judge, as a
        serving benchmark's client does: the engine's own limit is not trusted), wait (bounded)
        until every one completed, and return what was read."""

    def stop(self) -> None:
        """Stop the engine and every process it started (idempotent)."""


class EngineAdapter(Protocol):
    """Starts engines of one kind (``builtin``, ``vllm``, ``sglang``)."""

    name: str

    def start(self, arm: str, kernels_dir: Path, workload: Any, case: Any,
              log_dir: Path) -> EngineRun:
        """A fresh engine for ``arm`` with the kernel tree ``kernels_dir``, sized for ``case``,
        its logs under ``log_dir``; ready to serve when this returns."""


@attrs.frozen
class RunSpec:
    """What every run of a measurement shares: the workload, each arm's tree, the log folder."""

    workload: Any
    kernels: Mapping[str, Path]
    log_dir: Path

    def tree(self, arm: str) -> Path:
        return Path(self.kernels[arm])


# --------------------------------------------------------------------------- failures


class EngineFailure(Exception):
    """An engine run failed: the candidate's fault on the candidate arm, the evaluator's on the
    baseline arm (its engine and tree are the task's)."""

    kind: ClassVar[FailureKind] = FailureKind.CRASHED
    """The failure kind (``record["failure"]["kind"]``) when the candidate arm failed."""
    baseline_kind: ClassVar[str] = INFRA
    """The kind when the baseline arm failed."""

    def __init__(self, message: str, *, arm: str, phase: str = "", **details: Any):
        super().__init__(message)
        self.message = message
        self.arm = arm
        self.phase = phase
        self.details = details

    @property
    def candidate_fault(self) -> bool:
        return self.arm == "candidate"

    @property
    def failure_kind(self) -> str:
        return self.kind if self.candidate_fault else self.baseline_kind

    def to_failure(self) -> dict[str, Any]:
        """A record's ``failure`` entry."""
        who = "the candidate's" if self.candidate_fault else "the baseline's"
        return {"kind": self.failure_kind, "phase": self.phase, "arm": self.arm,
                "message": f"{who} engine: {self.message}",
                "retryable": self.failure_kind == INFRA, **self.details}


class EngineCrashed(EngineFailure):
    """The engine process exited (or its server died) before the run was over."""

    kind = FailureKind.CRASHED


class EngineOverLimit(EngineFailure):
    """The engine's processes filled the disk or the host's memory past the limit, or ran too
    many processes (``disk_watch``, ``memory_watch``): stopped."""

    kind = FailureKind.RESOURCES
    baseline_kind = FailureKind.TASK_ERROR


class EngineTimeout(EngineFailure):
    """The engine did not answer within a deadline."""

    kind = FailureKind.TIMEOUT


class EngineProtocolError(EngineFailure):
    """The engine sent something it must not (malformed, oversized, unknown request, too many
    tokens), or did not prove it called the kernel tree's entrypoints."""

    kind = FailureKind.PROTOCOL


class KernelLoadFailed(EngineFailure):
    """The arm's kernel tree did not import, or lacks an entrypoint."""

    kind = FailureKind.COMPILE
    baseline_kind = FailureKind.TASK_ERROR


class SettingChanged(EngineFailure):
    """The server runs with other settings than the workload declares (model, context length)."""

    kind = FailureKind.POLICY


class CountCheckFailed(EngineFailure):
    """A run's counts or timestamps are impossible for the fixed work (requests missing, short
    outputs, a duration shorter than a request's latency)."""

    kind = FailureKind.TIMING_CHECK

    def __init__(self, violations: Sequence[str], *, arm: str, phase: str = "timing"):
        super().__init__("count check failed: " + "; ".join(violations), arm=arm, phase=phase,
                         violations=list(violations))
        self.violations = list(violations)


class EngineSetupError(Exception):
    """The engine could not be set up for reasons no kernel tree causes (not installed, no
    sandbox, an unusable folder): the evaluator's or host's fault on either arm."""

    kind = INFRA

    def __init__(self, message: str, *, arm: str = "", phase: str = "startup"):
        super().__init__(message)
        self.message = message
        self.arm = arm
        self.phase = phase

    def to_failure(self) -> dict[str, Any]:
        return {"kind": INFRA, "phase": self.phase, "arm": self.arm, "message": self.message,
                "retryable": True}
