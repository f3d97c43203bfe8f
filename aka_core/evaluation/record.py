"""The evaluation record, typed where the core reads it (``TaskResult.evaluation``).

A judge (the operator judge's process, a format's own judge such as e2e's, a task's harness)
produces its record as JSON: it is free to add keys. The core structures that JSON once, where it
reads it (``aka_core.lifecycle.evaluate``, through ``aka_core.convert``), into the classes below:
the parts it decides on (failure, correctness, performance, compile-only, confinement, rules,
integrity) are typed fields; whatever else a judge recorded is kept, as it came, in each part's
``extra`` (diagnostics, kernel caches, a format's own section: ``e2e``, ``harness``).

Each part is an ``OpenRecord``: it remembers which keys it was read with and in what order
(``present``), so that writing it back gives the same keys in the same order (a key that held
null is written as null again); a field set later, and not null, is written after them. Old
``task_result.yaml`` files therefore load and are written back unchanged.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from aka_core.convert import converter
from aka_core.failures import FailureKind

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None
"""A value as JSON holds it: what a judge may record beyond the typed fields."""


@attrs.frozen(kw_only=True)
class OpenRecord:
    """A part of the record: typed fields, plus the keys a judge added that the core does not
    read (``extra``), in the order they were read (``present``)."""

    extra: dict[str, Json] = attrs.field(factory=dict, repr=False)
    """Keys of this part that have no field here, with their values as the judge wrote them."""
    present: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)
    """The keys this part was read with, in order (empty for a part made in code)."""

    _RESERVED: ClassVar[frozenset[str]] = frozenset({"extra", "present"})

    def without(self, *keys: str) -> typing.Self:
        """This part with ``keys`` removed (fields set to None, extra keys dropped)."""
        fields = {f.name for f in attrs.fields(type(self))} - self._RESERVED
        return attrs.evolve(
            self,
            **{k: None for k in keys if k in fields},
            extra={k: v for k, v in self.extra.items() if k not in keys},
            present=tuple(k for k in self.present if k not in keys),
        )

    def with_extra(self, **values: Json) -> typing.Self:
        """This part with keys that have no field set (added after those it was read with)."""
        return attrs.evolve(self, extra={**self.extra, **values})


# --------------------------------------------------------------------------- the parts


@attrs.frozen(kw_only=True)
class Failure(OpenRecord):
    """What stopped the evaluation: its kind (whose fault), the phase, and where."""

    kind: FailureKind
    message: str = ""
    phase: str | None = None
    retryable: bool | None = None
    file: str | None = None
    line: int | None = None
    side: str | None = None
    case: str | None = None
    stage: str | None = None
    """``first_call``: the candidate built, then failed in its first call."""
    traceback: str | None = None
    log_tail: str | None = None

    def text(self) -> str:
        """The message with the file and line it names, if any."""
        where = ""
        if self.file:
            where = f" ({self.file}" + (f":{self.line}" if self.line else "") + ")"
        return f"{self.message}{where}"


@attrs.frozen(kw_only=True)
class RoundingMismatch(OpenRecord):
    candidate: float
    allowed: float


@attrs.frozen(kw_only=True)
class Check(OpenRecord):
    """One correctness check (a case and seed, or a harness command)."""

    case: str | None = None
    seed_index: int | None = None
    held_out: bool | None = None
    passed: bool | None = None
    reason: str | None = None
    max_abs_err: float | None = None
    rel_l2: float | None = None
    baseline_rel_l2: float | None = None
    rounding_mismatch: RoundingMismatch | None = None


@attrs.frozen(kw_only=True)
class Correctness(OpenRecord):
    passed: bool = False
    checks: list[Check] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class Samples(OpenRecord):
    """Per-call times (ms) of the timed pairs, in order."""

    baseline: list[float] = attrs.Factory(list)
    candidate: list[float] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class PerformanceCase(OpenRecord):
    """One timed case: median per-call times, the paired speedup, the raw samples."""

    case: str
    held_out: bool | None = None
    method: str | None = None
    pairs: int | None = None
    speedup: float | None = None
    ci95: list[float] | None = None
    baseline_median_ms: float | None = None
    candidate_median_ms: float | None = None
    speed_of_light_ms: float | None = None
    reference_ms: float | None = None
    """The task's reference timed alone (``aka validate --run``)."""
    samples_ms: Samples | None = None

    def times(self) -> tuple[float, float, float | None] | None:
        """(baseline, candidate, speed of light) in ms when both medians are positive finite
        numbers (the speed of light only where it is one too), else None."""
        base, cand, sol = self.baseline_median_ms, self.candidate_median_ms, self.speed_of_light_ms
        if not all(v is not None and math.isfinite(v) and v > 0 for v in (base, cand)):
            return None
        assert base is not None and cand is not None
        return base, cand, sol if sol is not None and math.isfinite(sol) and sol > 0 else None


@attrs.frozen(kw_only=True)
class Performance(OpenRecord):
    """The timing: measured (and the speedup with its 95% CI), or why not."""

    measured: bool = False
    reason_not_measured: str | None = None
    speedup: float | None = None
    ci95: list[float] | None = None
    method: list[str] | None = None
    description: str | None = None
    cases: list[PerformanceCase] | None = None


@attrs.frozen(kw_only=True)
class Device(OpenRecord):
    """The device the judge ran on (a backend's ``describe_device``)."""

    kind: str | None = None
    vendor: str | None = None
    name: str | None = None
    architecture: str | None = None


@attrs.frozen(kw_only=True)
class CompileOnly(OpenRecord):
    """A compile-only evaluation: built for ``architecture`` on a host without that GPU."""

    architecture: str | None = None
    built: list[str] = attrs.Factory(list)
    note: str = ""


@attrs.frozen(kw_only=True)
class Confinement(OpenRecord):
    """How the runners were confined (each side's own record is in ``extra``)."""

    policy: str | None = None
    confined: bool = False


@attrs.frozen(kw_only=True)
class Rules(OpenRecord):
    torch_compute: str | None = None
    torch_copies: str | None = None
    compute_precision: str | None = None
    static_violations: list[str] | None = None
    torch_ops_seen: list[str] | None = None


@attrs.frozen(kw_only=True)
class CompileStep(OpenRecord):
    passed: bool | None = None
    seconds: float | None = None


@attrs.frozen(kw_only=True)
class EvaluatorIntegrity(OpenRecord):
    files: int
    digest: str
    unchanged: bool


@attrs.frozen(kw_only=True)
class EvaluationRecord(OpenRecord):
    """The evaluator's full record (``<task>/task_result.yaml``'s ``evaluation``).

    ``judge`` names a format's own judge (``e2e``); absent for the operator judge. ``trust`` is
    ``harness`` where the task's own commands judged it.
    """

    judge: str | None = None
    trust: str | None = None
    trust_note: str | None = None
    phases: dict[str, float] | None = None
    device: Device | None = None
    confinement: Confinement | None = None
    rules: Rules | None = None
    compile: CompileStep | None = None
    compile_only: CompileOnly | None = None
    correctness: Correctness | None = None
    performance: Performance | None = None
    wall_clock_check: Json = None
    """The judge's own clock agreed with every timed block (operator: a mapping; e2e: true)."""
    failure: Failure | None = None
    traceback: str | None = None
    """A task that failed before its evaluation: where the lifecycle stopped."""
    logs: dict[str, str] | None = None
    phases_wall: dict[str, float] | None = None
    wall_seconds: float | None = None
    worker_log: str | None = None
    evaluator_integrity: EvaluatorIntegrity | None = None
    worker_log_tail: str | None = None
    candidate_log_tail: str | None = None
    baseline_log_tail: str | None = None

    @property
    def failure_kind(self) -> FailureKind | None:
        return self.failure.kind if self.failure is not None else None

    def correctness_passed(self) -> bool:
        return self.correctness is not None and self.correctness.passed

    def enforced_rules(self) -> bool:
        """The task's rules were enforced (PyTorch compute forbidden, or a precision rule)."""
        return self.rules is not None and (
            self.rules.torch_compute == "forbidden" or bool(self.rules.compute_precision)
        )


@attrs.frozen(kw_only=True)
class Gates:
    """The gates of an evaluation record (``evaluate.outcome``): compiled? correct? measured?"""

    compile_only: bool
    pass_compilation: bool | None
    pass_correctness: bool | None
    performance_measured: bool
    speedup: float | None
    ci95: tuple[float, float] | None
    failure_kind: FailureKind | None
    task_error: bool
    infra_error: bool


def as_record(value: EvaluationRecord | Mapping[str, Any]) -> EvaluationRecord:
    """``value`` as a record: a mapping (a judge's JSON, a record read from disk) is structured."""
    if isinstance(value, EvaluationRecord):
        return value
    return converter.structure(dict(value), EvaluationRecord)


# --------------------------------------------------------------------------- conversion


def _is_open(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, OpenRecord)


def _structure_hook(cls: type[OpenRecord]) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in attrs.fields(cls)} - OpenRecord._RESERVED
    as_json = {f.name for f in attrs.fields(cls) if f.type in ("Json", Json)}

    def structure(data: Any, _: Any) -> OpenRecord:
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: expected a mapping, found {type(data).__name__}")
        known = {}
        for key, value in data.items():
            if key in names:
                known[key] = value if key in as_json else converter.structure(value, hints[key])
        extra = {str(k): v for k, v in data.items() if k not in names}
        return cls(**known, extra=extra, present=tuple(str(k) for k in data))

    return structure


def _unstructure_hook(cls: type[OpenRecord]) -> Any:
    names = [f.name for f in attrs.fields(cls) if f.name not in OpenRecord._RESERVED]
    fields = set(names)
    defaults = {
        f.name: f.default.factory()
        if isinstance(f.default, attrs.Factory)  # type: ignore[arg-type]
        else f.default
        for f in attrs.fields(cls)
        if f.default is not attrs.NOTHING
    }

    def written(obj: OpenRecord, key: str, value: Any) -> bool:
        """A key read is written back; else a field that holds something (in a part read
        from JSON: something else than its default, which the judge did not write)."""
        if key in obj.present:
            return True
        if value is None:
            return False
        return not obj.present or key not in defaults or value != defaults[key]

    def unstructure(obj: OpenRecord) -> dict[str, Any]:
        seen = set(obj.present)
        order = [
            *obj.present,
            *(n for n in names if n not in seen),
            *(k for k in obj.extra if k not in seen and k not in fields),
        ]
        out: dict[str, Any] = {}
        for key in order:
            if key in fields:
                value = getattr(obj, key)
                if not written(obj, key, value):
                    continue
                out[key] = converter.unstructure(value)
            elif key in obj.extra:
                out[key] = obj.extra[key]
        return out

    return unstructure


converter.register_structure_hook_factory(_is_open, _structure_hook)
converter.register_unstructure_hook_factory(_is_open, _unstructure_hook)
converter.register_unstructure_hook(FailureKind, lambda kind: kind.value)
