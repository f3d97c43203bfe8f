"""How an evaluation fails: the kinds of failure an evaluation record names
(``record["failure"]["kind"]``), and the exception that ends an evaluation with one.

A kind says whose fault the failure is, and so what it means for a reward: the candidate's
(a valid verdict: the candidate is not accepted), the task's (``task_error``: the task itself is
broken, nothing about the candidate is known) or the evaluator's (``infra_error``: nothing was
judged; retry). The values are the strings the records on disk hold.
"""

from __future__ import annotations

import enum
from typing import Any


class FailureKind(enum.StrEnum):
    """What stopped an evaluation, and who is at fault (docs/measurement.md, "From record to
    result")."""

    COMPILE = "compile"
    """The candidate does not build or load (or hung or crashed while loading). The candidate's
    fault: it does not compile."""

    COMPILE_OK_RUNTIME_ERROR = "compile_ok_runtime_error"
    """The candidate built but raised when it was first called. The candidate's fault: it
    compiles, it is not correct."""

    CORRECTNESS = "correctness"
    """The candidate's outputs do not match the reference (values, structure, or it modified its
    inputs; or it raised during the checks). The candidate's fault."""

    PRECISION = "precision"
    """The candidate's outputs are within tolerance but computed in a narrower type than the task
    allows (the precision rule). The candidate's fault."""

    POLICY = "policy"
    """The candidate broke the task's rules (e.g. ``rules.torch_compute: forbidden``, or a rule
    of an e2e workload). The candidate's fault."""

    TIMING_CHECK = "timing_check"
    """A check during timing failed: a timed call's output was wrong, or the candidate did not
    enqueue its timed block. The candidate's fault; the ``timing_sound`` gate fails."""

    IMPOSSIBLE_TIME = "impossible_time"
    """The candidate's time is below the case's speed of light, or a block shorter than an empty
    one. The candidate's fault (a forged or skipped computation)."""

    INTERFERENCE = "interference"
    """The candidate's process used the GPU outside its turn (the baseline was slowed while the
    candidate was alive). The candidate's fault."""

    PROTOCOL = "protocol"
    """The candidate's runner broke the judge-runner protocol (malformed or forged messages,
    descriptors or memory). The candidate's fault."""

    TIMEOUT = "timeout"
    """The candidate ran past a phase's deadline. The candidate's fault."""

    CRASHED = "crashed"
    """The candidate's runner process died (a segfault, an illegal memory access, an exit). The
    candidate's fault, unless another process took the GPU (then ``infra_error``)."""

    RESOURCES = "resources"
    """The GPU ran out of memory while the candidate's process held it, on a GPU that had room
    when the evaluation began. The candidate's fault."""

    TASK_ERROR = "task_error"
    """The task is broken: its baseline does not build, raises or does not match the reference;
    its inputs factory or reference raises, hangs or returns the wrong thing; its cost does not
    evaluate. The task's fault: the candidate was not judged."""

    INFRA_ERROR = "infra_error"
    """The evaluator or the host failed: confinement unavailable, the judge or the baseline's
    runner failed, a runner lost before any of its side's code ran, the evaluator's code changed,
    unexplained drift. The evaluator's fault, not the candidate's: the candidate was not judged
    and the evaluation may be retried."""


CANDIDATE_FAILURES: frozenset[FailureKind] = frozenset({
    FailureKind.COMPILE, FailureKind.COMPILE_OK_RUNTIME_ERROR, FailureKind.CORRECTNESS,
    FailureKind.PRECISION, FailureKind.POLICY, FailureKind.TIMING_CHECK,
    FailureKind.IMPOSSIBLE_TIME, FailureKind.INTERFERENCE, FailureKind.PROTOCOL,
    FailureKind.TIMEOUT, FailureKind.CRASHED, FailureKind.RESOURCES})
"""The kinds that are the candidate's fault: a verdict on the candidate."""

TIMING_FAILURES: frozenset[FailureKind] = frozenset({
    FailureKind.TIMING_CHECK, FailureKind.IMPOSSIBLE_TIME, FailureKind.INTERFERENCE})
"""The candidate's failures found by the timing phase's own checks."""


class JudgeFailure(Exception):
    """Ends the evaluation: ``kind`` is the failure's class, ``details`` go to the record."""

    def __init__(self, kind: FailureKind, message: str, **details: Any):
        super().__init__(message)
        self.kind = kind
        self.details = details


INFRA = FailureKind.INFRA_ERROR
"""Short for the evaluator's failures, which the judge raises often."""


# Where an interference reading in the retry band was taken against (the clean phase's
# ``placement``): ``same`` (the memory of the case's pairs), ``new``, or ``held_by_candidate``
# (new because the candidate's processes held the memory the baseline's would have been kept
# in). Drift does not repeat on the first and the last, so a reading there in every attempt is
# the candidate's (``aka_core.service.outcome``).
HELD_BY_CANDIDATE = "held_by_candidate"
BLAMEABLE_PLACEMENTS = ("same", HELD_BY_CANDIDATE)
