"""The quality checks of ``aka validate``: is the task able to tell a good candidate from a bad one?

Static (every ``aka validate``):

* ``timeouts``: the task declares its limits, and each is sane (10-1800 s);
* ``held_out_coverage``: held-out cases or draws exist and can differ from the visible cases;
* ``unfinished``: no ``TODO`` / ``FIXME`` left in task.yaml.

With ``--run`` (after the baseline matched the reference):

* ``hang_guard``: each phase of the baseline's run stayed well inside the task's limits;
* ``tolerance_calibration``: the reference against itself (run twice; on inputs cast to the
  output dtype; one unit in the last place of the output dtype, by which two correctly rounded
  outputs may differ), in units of the tolerance: WARN when the tolerance is tighter than that
  or more than 100x looser;
* ``trivial_candidate[...]``: the candidates of ``trivial_candidates``, each evaluated by the real
  evaluator (``api.evaluate_candidate``): FAIL when zeros or the input pass correctness, or when
  PyTorch compute is accepted by a task whose rules forbid it.

Every check is a dict ``{name, status: PASS|WARN|FAIL, detail}`` as in the rest of the report.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aka_core.authoring.trivial_candidates import DESCRIPTIONS, TORCH_COMPUTE, WRONG_OUTPUT, write_candidate
from aka_core.errors import AkaError
from aka_core.evaluation.failures import FailureKind
from aka_core.evaluation.record import EvaluationRecord
from aka_core.models import TASK_FILE, Task
from aka_core.plugin.host import PluginHost
from aka_core.yamlio import load_yaml

SANE_TIMEOUT_SECONDS = (10.0, 1800.0)
PHASE_SHARE_WARN = 0.5
LOOSEST_FACTOR = 100.0
_PHASE_LIMITS = {"compile": "compile_seconds", "correctness": "correctness_seconds",
                 "timing": "timing_seconds"}

Check = dict[str, Any]


def check(name: str, status: str, detail: str, **extra: Any) -> Check:
    return {"name": name, "status": status, "detail": detail, **extra}


# --------------------------------------------------------------------------- static


def static_checks(task: Task) -> list[Check]:
    source = load_yaml(task.root / TASK_FILE)
    return [_timeouts(task, source), _held_out_coverage(task), *_unfinished(task)]


def _timeouts(task: Task, source: Any) -> Check:
    declared = source.get("timeouts") or {} if isinstance(source, Mapping) else {}
    lo, hi = SANE_TIMEOUT_SECONDS
    limits = {name: getattr(task.timeouts, name) for name in _PHASE_LIMITS.values()}
    shown = ", ".join(f"{k} {v:g}" for k, v in limits.items())
    missing = [name for name in limits if name not in declared]
    odd = [f"{name} {value:g} s" for name, value in limits.items() if not lo <= value <= hi]
    if odd:
        return check("timeouts", "WARN", f"{', '.join(odd)} outside {lo:g}-{hi:g} s: a hung "
                     "candidate holds the device until its limit; a short one stops honest ones")
    if missing:
        return check("timeouts", "WARN", f"task.yaml declares no {', '.join(missing)}: the "
                     f"defaults apply ({shown}); declare the limits the task needs")
    return check("timeouts", "PASS", shown)


def _held_out_coverage(task: Task) -> Check:
    visible = [dict(c.params) for c in task.cases]
    draws = task.held_out_draws
    if not task.held_out_cases and draws is None:
        return check("held_out_coverage", "WARN",
                     "no held-out cases: hard-coded shapes would go unnoticed")
    copies = [c.name for c in task.held_out_cases if dict(c.params) in visible]
    if copies:
        return check("held_out_coverage", "WARN", f"held-out case(s) {', '.join(copies)} repeat a "
                     "visible case's params: they test nothing the agent does not see")
    parts = []
    if task.held_out_cases:
        parts.append(f"{len(task.held_out_cases)} held-out case(s)")
    if draws is not None:
        varied = {name: spec for name, spec in draws.params.items() if _values(spec) != 1}
        if not varied:
            what = ("only reproduce a visible case" if dict(draws.params) in visible
                    else "draw one fixed case, which is unseen but not secret")
            return check("held_out_coverage", "WARN", f"held_out_draws {what}: give a range or "
                         "a choice to the sizes that must vary")
        parts.append(f"{draws.count} draw(s) over " + ", ".join(
            f"{name} {_describe(spec)}" for name, spec in varied.items()))
    return check("held_out_coverage", "PASS", "; ".join(parts))


def _values(spec: Any) -> int:
    if isinstance(spec, Mapping) and "range" in spec:
        lo, hi = (int(v) for v in spec["range"])
        step = int(spec.get("multiple_of", 1))
        return max(0, hi // step - -(-lo // step) + 1)
    if isinstance(spec, Mapping) and "choice" in spec:
        return len({repr(v) for v in spec["choice"]})
    return 1


def _describe(spec: Any) -> str:
    if isinstance(spec, Mapping) and "range" in spec:
        return f"[{spec['range'][0]}, {spec['range'][1]}]"
    if isinstance(spec, Mapping) and "choice" in spec:
        return f"in {spec['choice']}"
    return str(spec)


def _unfinished(task: Task) -> list[Check]:
    lines = (task.root / TASK_FILE).read_text(encoding="utf-8").splitlines()
    found = [i for i, line in enumerate(lines, start=1) if "TODO" in line or "FIXME" in line]
    if not found:
        return []
    where = ", ".join(f"task.yaml:{i}" for i in found[:5])
    return [check("unfinished", "WARN", f"{where} still say(s) TODO/FIXME: finish the draft")]


# --------------------------------------------------------------------------- with --run


def run_checks(task: Task, host: PluginHost, device: str, record: EvaluationRecord, *,
               trivial: bool = True) -> list[Check]:
    """Hang guard, tolerance calibration and (unless ``trivial`` is false) trivial candidates,
    after a good baseline run."""
    from aka_core.authoring.task_probe import ProbeError, run_probe
    from aka_core.evaluation.request import cases_for

    out = [_hang_guard(task, record)]
    cases = list(cases_for(task, device=device, held_out=False)[0])
    try:
        probe = run_probe(task, host, device, cases)
    except ProbeError as exc:
        out.append(check("tolerance_calibration", "FAIL", str(exc)))
        return out
    out.append(_calibration(task, probe["cases"]))
    if trivial:
        out += _trivial_candidates(task, host, device, probe["cases"])
    return out


def _hang_guard(task: Task, record: EvaluationRecord) -> Check:
    phases = record.phases_wall or {}
    close = []
    for phase, field in _PHASE_LIMITS.items():
        limit = getattr(task.timeouts, field)
        took = phases.get(phase)
        if took is not None and took > PHASE_SHARE_WARN * limit:
            close.append(f"{phase} took {took:.1f} s of its {limit:g} s")
    if close:
        return check("hang_guard", "WARN", "; ".join(close) + ": a candidate a little slower than "
                     "the baseline would be stopped; raise the limit or shrink the cases")
    ran = ", ".join(f"{k} {v:.1f} s" for k, v in phases.items() if k in _PHASE_LIMITS)
    return check("hang_guard", "PASS", f"phases within half their limits ({ran or 'none ran'})")


def _calibration(task: Task, cases: list[Mapping[str, Any]]) -> Check:
    names = ("rerun", "cast_inputs", "rounding")
    worst = {name: max((c["scales"][name] for c in cases), default=0.0) for name in names}
    baseline = max((c["scales"]["baseline"] for c in cases), default=0.0)
    dtypes = sorted({d for c in cases for d in c["float_dtypes"]})
    if not dtypes:
        return check("tolerance_calibration", "PASS", "integer or boolean outputs: compared "
                     "exactly")
    observed = max(worst.values())
    measured = ", ".join(f"{k} {v:.3g}" for k, v in worst.items())
    detail = (f"reference vs itself in units of the {', '.join(dtypes)} tolerance: {measured} "
              f"(baseline {baseline:.3g}; 1.0 is the tolerance)")
    if observed > 1.0:
        return check("tolerance_calibration", "WARN", f"{detail}: the tolerance is tighter than "
                     "the reference's own difference, so a correct kernel can fail; loosen it",
                     scales=worst)
    exact = all(task.tolerance[d].rtol == 0 and task.tolerance[d].atol == 0
                for d in dtypes if d in task.tolerance)
    if observed * LOOSEST_FACTOR < 1.0 and not exact:
        return check("tolerance_calibration", "WARN", f"{detail}: the tolerance is more than "
                     f"{LOOSEST_FACTOR:g}x looser than that, so wrong results can pass; tighten "
                     "rtol/atol", scales=worst)
    return check("tolerance_calibration", "PASS", detail, scales=worst)


def _trivial_candidates(task: Task, host: PluginHost, device: str,
                        cases: list[Mapping[str, Any]]) -> list[Check]:
    forbidden = task.rules.torch_compute == "forbidden"
    out = []
    with tempfile.TemporaryDirectory(prefix="aka-trivial-") as tmp:
        for kind in (*WRONG_OUTPUT, *TORCH_COMPUTE):
            name = f"trivial_candidate[{kind}]"
            if kind in TORCH_COMPUTE and not forbidden:
                out.append(check(name, "PASS", "not evaluated: rules.torch_compute is allowed, "
                                 "so PyTorch compute is a candidate's right"))
                continue
            folder = write_candidate(kind, task, cases, Path(tmp))
            out.append(_judge_trivial(name, kind, task, host, device, folder))
    return out


def _judge_trivial(name: str, kind: str, task: Task, host: PluginHost, device: str,
                   folder: Path) -> Check:
    from aka_core import api

    what = f"a candidate that {DESCRIPTIONS[kind]}"
    try:
        for _attempt in range(2):  # an infra_error is the evaluator's, and retryable: once
            result = api.evaluate_candidate(task.root, folder, device=device, held_out=False,
                                            measure_performance=False, host=host)
            if result.status != "infra_error":
                break
    except AkaError as exc:
        return check(name, "WARN", f"{what} could not be evaluated: {exc}")
    record = result.evaluation
    kind_of_failure = record.failure_kind
    reason = (result.acceptance.reason if result.acceptance else result.error) or ""
    if result.status != "completed":
        return check(name, "WARN", f"{what} was not judged ({result.status}): {reason}")
    if kind in WRONG_OUTPUT:
        if _matched_reference(record, kind_of_failure):
            rescue = f" (only the {kind_of_failure} rule rejected it)" if kind_of_failure else ""
            return check(name, "FAIL", f"{what} passes the correctness check{rescue}: the "
                         "tolerance or the inputs cannot tell a wrong result from a right one; "
                         "tighten atol/rtol or make the inputs vary more")
        if kind_of_failure == FailureKind.CORRECTNESS:
            return check(name, "PASS", f"rejected: {_short(reason)}")
        return check(name, "WARN", f"{what} was rejected, but not by the correctness check: "
                     f"{_short(reason)}")
    if result.candidate_accepted:
        return check(name, "FAIL", f"{what} is accepted although rules.torch_compute is "
                     "forbidden: the rule is not enforced for this task")
    if kind_of_failure == FailureKind.POLICY:
        return check(name, "PASS", f"rejected by the torch_compute rule: {_short(reason)}")
    return check(name, "WARN", f"{what} was rejected, but not by the torch_compute rule: "
                 f"{_short(reason)}")


def _matched_reference(record: EvaluationRecord, failure_kind: str | None) -> bool:
    """Whether the outputs passed the tolerance comparison (a later rule may still reject)."""
    if record.correctness_passed() or failure_kind == FailureKind.PRECISION:
        return True
    checks = record.correctness.checks if record.correctness is not None else []
    return failure_kind == FailureKind.POLICY and bool(checks) and all(c.passed for c in checks)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
