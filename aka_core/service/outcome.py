"""What a trainer can act on: an evaluation's record turned into a service result.

``status`` is one of

* ``scored``: the candidate was judged; ``reward`` is the scorer's score (0 when it was correct
  but not faster than the threshold, or when this host measures no performance: ``measured``);
* ``candidate_failure``: the candidate's fault (did not build, wrong, hung, crashed, broke a
  rule, read impossibly fast); ``reward`` is the scorer's score for it (0), ``failure`` says why:
  a zero to learn from;
* ``task_error``: the task's baseline or reference failed: no reward (fix the task);
* ``infra_error``: the evaluator or the host failed (retried by the service before it is
  reported): no reward, ``retryable``. One such failure can be the candidate's doing: the
  baseline 3-10% slower beside the candidate's process than alone on the same memory, the GPU's
  clocks steady (``interference_band``), too little to blame once, since drift happens. Drift
  does not repeat, so when every attempt reads it, the request ends as the candidate's failure
  (``interference``, ``exhausted``): otherwise a candidate could turn its every penalty into a
  retry;
* ``cancelled``, ``expired``: no evaluation (``expired``: the request's deadline passed).

An evaluator fault is never a zero reward: ``reward`` is None for every status but the first two.
"""

from __future__ import annotations

from typing import Any

from aka_core.evaluation import gpu_state
from aka_core.evaluation.failures import BLAMEABLE_PLACEMENTS, CANDIDATE_FAILURES, FailureKind

RETRY = "retry"


def classify(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(status, result) of a job's payload; status ``retry`` when the evaluator failed."""
    if "crash" in payload:
        return RETRY, {"message": f"the evaluation process failed: {payload['crash']}"}
    if "error" in payload:
        error = payload["error"]
        return "task_error", _result("task_error", None, message=(
            f"the request could not be evaluated: {error.get('message')}"))
    record = payload.get("record") or {}
    status = record.get("status")
    evaluation = record.get("evaluation") or {}
    failure = evaluation.get("failure") or None
    kind = (failure or {}).get("kind")
    if status == "infra_error" or kind == FailureKind.INFRA_ERROR or status == "error":
        retry = {"message": (failure or {}).get("message") or record.get("error")
                 or "the evaluator failed"}
        # The candidate's doing if it repeats: read on the same memory, on a GPU whose clocks
        # held (a slowdown in the pairs but not alone would repeat too, and is the GPU's).
        if ((failure or {}).get("cause") == "interference_band"
                and failure.get("placement") in BLAMEABLE_PLACEMENTS
                and gpu_state.steady((evaluation.get("performance") or {}).get("gpu_state"))):
            retry["blame_if_repeated"] = FailureKind.INTERFERENCE.value
        return RETRY, retry
    if kind == FailureKind.TASK_ERROR:
        return "task_error", _result("task_error", None, record=record, failure=failure,
                                     message=(failure or {}).get("message", ""))
    performance = evaluation.get("performance") or {}
    if kind in CANDIDATE_FAILURES or record.get("pass_correctness") is False:
        return "candidate_failure", _result(
            "candidate_failure", float(record.get("score") or 0.0), record=record,
            failure=failure, message=(failure or {}).get("message", "the candidate failed"))
    return "scored", _result(
        "scored", float(record.get("score") or 0.0), record=record, failure=None,
        message=(record.get("acceptance") or {}).get("reason", ""),
        measured=bool(performance.get("measured")))


def _result(status: str, reward: float | None, *, record: dict[str, Any] | None = None,
            failure: dict[str, Any] | None = None, message: str = "",
            measured: bool | None = None) -> dict[str, Any]:
    record = record or {}
    performance = (record.get("evaluation") or {}).get("performance") or {}
    return {
        "status": status, "reward": reward, "retryable": status == "infra_error",
        "accepted": bool(record.get("candidate_accepted")),
        "speedup": record.get("speedup_ratio"), "ci95": performance.get("ci95"),
        "measured": bool(performance.get("measured")) if measured is None else measured,
        "failure": ({k: failure.get(k) for k in ("kind", "message", "phase", "case", "file",
                                                 "line") if failure.get(k) is not None}
                    if failure else None),
        "message": str(message)[:2000],
        "record": record or None,
    }


def infra(message: str) -> dict[str, Any]:
    return {"status": "infra_error", "reward": None, "retryable": True, "message": message}


def exhausted(message: str, blames: list[str | None]) -> tuple[str, dict[str, Any]]:
    """How a request ends when its last attempt failed for the evaluator's reasons too: an
    ``infra_error``, unless every attempt's failure was one the candidate can cause and drift
    cannot repeat (``blame_if_repeated``, the same in each): then the candidate's failure."""
    attempts = len(blames)
    blame = blames[0] if blames else None
    if blame is None or attempts < 2 or any(b != blame for b in blames):
        return "infra_error", infra(f"{message} (after {attempts} attempts)")
    text = (f"the same in each of {attempts} attempts, which drift does not repeat: the "
            f"candidate's process slowed the baseline; the last: {message}")
    return "candidate_failure", _result("candidate_failure", 0.0, failure={
        "kind": blame, "message": text, "phase": "timing"}, message=text)
