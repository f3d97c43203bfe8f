"""What the parent asks a worker to evaluate (sent as JSON on the worker's stdin)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from aka_core.convert import structure, unstructure
from aka_core.models import (
    Case,
    Confinement,
    Cost,
    HeldOutDraws,
    Task,
    TaskRules,
    Timeouts,
    TimingPolicy,
    Tolerance,
)


@attrs.frozen(kw_only=True)
class SideRef:
    """A callable ``file.py:function`` below ``root``."""

    root: str
    ref: str


@attrs.frozen(kw_only=True)
class EvaluationRequest:
    task_id: str
    backend: str
    reference: SideRef
    inputs: SideRef
    baseline: SideRef
    candidate: SideRef | None
    """None: evaluate the baseline alone (task validation)."""
    cases: tuple[Case, ...]
    held_out: tuple[str, ...] = ()
    """Names of the cases in ``cases`` that the agent never saw."""
    tolerance: dict[str, Tolerance]
    device: Literal["cuda", "cpu"]
    seeds_per_case: int = 3
    measure_performance: bool = True
    timing: TimingPolicy = attrs.Factory(TimingPolicy)
    timeouts: Timeouts = attrs.Factory(Timeouts)
    time_reference: bool = False
    """Also time the reference alone (task validation checks its run time)."""
    compile_only_architecture: str | None = None
    """Build baseline and candidate for this architecture and stop: this host cannot run them."""
    held_out_draws: HeldOutDraws | None = None
    """Held-out cases the judge draws from the secret (not sent when ``held_out`` is off)."""
    cost: Cost | None = None
    rules: TaskRules = attrs.Factory(TaskRules)
    candidate_files: tuple[str, ...] = ()
    """The candidate's editable files (relative to its root): what the judge's policy reads."""
    confinement: Confinement = "required"
    protected: tuple[str, ...] = ()
    """Folders no runner may read (the tasks folder, the run directory, the repository's tests)."""
    backend_env: dict[str, str] = attrs.Factory(dict)
    """Variables the backend adds to its runners' environment."""
    backend_plugin: str | None = None
    """The entry point that provides the backend ("" for a built-in one): the judge loads that
    plugin alone (discovering every installed plugin costs it ~0.3 s). None: it discovers all."""
    held_out_seed: int | None = None
    """Where set, the held-out shapes are drawn from it (the same for every candidate) instead
    of from the per-evaluation secret."""
    secret_seed: int = 0
    """Per-evaluation secret; sent on stdin only, never written to disk or the environment."""

    def to_json(self) -> dict[str, Any]:
        return unstructure(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EvaluationRequest:
        return structure(data, cls)


def cases_for(task: Task, *, device: str, held_out: bool) -> tuple[tuple[Case, ...], tuple[str, ...]]:
    """The cases an evaluation runs: the smoke case on CPU, else the cases (+ held-out ones)."""
    if device == "cpu":
        if task.smoke_case is not None:
            return (task.smoke_case,), ()
        return task.cases[:1], ()
    cases = list(task.cases)
    hidden: list[str] = []
    if held_out:
        cases.extend(task.held_out_cases)
        hidden = [c.name for c in task.held_out_cases]
    return tuple(cases), tuple(hidden)
