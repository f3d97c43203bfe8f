"""Records to what a trainer acts on: no evaluator fault is ever a reward."""

from __future__ import annotations

import math

import pytest

from aka_core.service import outcome, verl


def record(status: str = "completed", kind: str | None = None, **fields: object) -> dict:
    evaluation: dict = {"performance": {"measured": True, "ci95": [1.1, 1.3]}}
    if kind:
        evaluation["failure"] = {"kind": kind, "message": f"{kind} happened", "phase": "x"}
    return {"record": {"status": status, "score": fields.pop("score", 0.0),
                       "evaluation": evaluation, **fields}}


@pytest.mark.parametrize(("payload", "status", "reward"), [
    (record(score=1.2, candidate_accepted=True, speedup_ratio=1.2), "scored", 1.2),
    (record(kind="correctness", pass_correctness=False), "candidate_failure", 0.0),
    (record(kind="timeout"), "candidate_failure", 0.0),
    (record(kind="impossible_time"), "candidate_failure", 0.0),
    (record(kind="task_error"), "task_error", None),
    (record(status="infra_error", kind="infra_error"), outcome.RETRY, None),
    (record(status="error"), outcome.RETRY, None),
    ({"crash": "MemoryError"}, outcome.RETRY, None),
    ({"error": {"kind": "UsageError", "message": "no editable file"}}, "task_error", None),
])
def test_classify(payload: dict, status: str, reward: float | None) -> None:
    got, result = outcome.classify(payload)
    assert got == status
    if status != outcome.RETRY:
        assert result["reward"] == reward and result["status"] == status
        assert result["retryable"] is False


def test_a_sample_without_a_judgement_raises_or_is_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    infra = {"id": "x", "status": "infra_error", "reward": None, "message": "GPU lost"}
    with pytest.raises(verl.RewardUnavailable, match="GPU lost"):
        verl._score(infra)
    monkeypatch.setenv("AKA_REWARD_ON_INFRA", "nan")
    assert math.isnan(verl._score(infra)["score"])
    assert verl._score({"status": "candidate_failure", "reward": 0.0, "failure": {
        "kind": "correctness"}})["score"] == 0.0


STEADY = {"sm_mhz": 1980.0, "clock_event_reasons": "0x0000000000000000"}


def band(placement: str, end: dict | None = None) -> dict:
    payload = record(status="infra_error", kind="infra_error")
    evaluation = payload["record"]["evaluation"]
    evaluation["failure"].update(cause="interference_band", placement=placement)
    evaluation["performance"]["gpu_state"] = {"start": STEADY, "pairs_end": STEADY,
                                              "end": end or STEADY}
    return payload


def test_a_retry_that_the_candidate_may_have_caused_says_whom_to_blame_if_it_repeats() -> None:
    status, result = outcome.classify(band("same"))
    assert status == outcome.RETRY and result["blame_if_repeated"] == "interference"
    # New memory that the candidate's own holding forced: as its own memory.
    status, result = outcome.classify(band("held_by_candidate"))
    assert status == outcome.RETRY and result["blame_if_repeated"] == "interference"
    # Alone on new memory, where the memory's placement alone moves a call by percents: never.
    status, result = outcome.classify(band("new"))
    assert status == outcome.RETRY and "blame_if_repeated" not in result
    # Nor on a GPU that slowed down (power capped) or whose clocks moved between the phases:
    # that would repeat too, and it is the GPU's.
    capped = {"sm_mhz": 1980.0, "clock_event_reasons": "0x0000000000000004"}
    for end in (capped, {**STEADY, "sm_mhz": 1755.0}, {"error": "nvidia-smi is late"}):
        status, result = outcome.classify(band("same", end))
        assert status == outcome.RETRY and "blame_if_repeated" not in result
    status, result = outcome.classify(record(status="infra_error", kind="infra_error"))
    assert "blame_if_repeated" not in result


def test_exhausted_blames_the_candidate_only_for_the_same_reading_in_every_attempt() -> None:
    status, result = outcome.exhausted("ran 5% slower", ["interference"] * 3)
    assert status == "candidate_failure" and result["reward"] == 0.0
    assert result["failure"]["kind"] == "interference" and result["retryable"] is False
    assert "each of 3 attempts" in result["message"] and "ran 5% slower" in result["message"]
    for blames in (["interference", None, "interference"], ["interference"], [None, None]):
        status, result = outcome.exhausted("GPU lost", blames)
        assert status == "infra_error" and result["reward"] is None and result["retryable"]
        assert f"after {len(blames)} attempts" in result["message"]
