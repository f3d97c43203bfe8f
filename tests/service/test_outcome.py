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
