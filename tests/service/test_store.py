"""The reward service's durable queue: idempotent ids, order, deadlines, retries, recovery."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aka_core.service.store import SCHEMA, TERMINAL, Conflict, RequestStore


@pytest.fixture
def store(tmp_path: Path) -> RequestStore:
    return RequestStore(tmp_path / "queue.db", max_attempts=2, retry_wait_s=0.0)


def test_the_same_id_and_content_is_one_request(store: RequestStore) -> None:
    first, new = store.submit("a", "d1", "t/x", deadline=None)
    assert new and first.state == "queued"
    again, new = store.submit("a", "d1", "t/x", deadline=None)
    assert not new and again.created == first.created
    with pytest.raises(Conflict):
        store.submit("a", "d2", "t/x", deadline=None)


def test_claims_take_priority_then_age_and_expire_passed_deadlines(store: RequestStore) -> None:
    store.submit("old", "d", "t", deadline=None)
    store.submit("late", "d", "t", deadline=time.time() - 1)
    store.submit("urgent", "d", "t", deadline=None, priority=5)
    store.submit("new", "d", "t", deadline=None)
    order = [store.claim("s").id for _ in range(3)]
    assert order == ["urgent", "old", "new"]
    assert store.claim("s") is None
    late = store.get("late")
    assert late.state == "expired" and late.result["retryable"] is True
    assert store.get("old").attempts == 1 and store.get("old").slot == "s"


def test_finish_is_final_and_a_cancelled_request_stays_cancelled(store: RequestStore) -> None:
    store.submit("a", "d", "t", deadline=None)
    store.submit("b", "d", "t", deadline=None)
    store.claim("s")
    store.claim("s")
    assert store.finish("a", "scored", {"status": "scored", "reward": 1.0}).state == "scored"
    assert store.finish("a", "candidate_failure", {}) is None  # not running any more
    assert store.cancel("b").state == "cancelled"
    assert store.finish("b", "scored", {"reward": 2.0}) is None
    assert store.get("b").state == "cancelled"
    assert store.cancel("a").state == "scored"  # terminal: cancel changes nothing


def test_evaluator_faults_are_retried_then_reported(store: RequestStore) -> None:
    store.submit("a", "d", "t", deadline=None)
    store.claim("s")
    assert store.retry("a", "judge died").state == "queued"
    store.claim("s")
    final = store.retry("a", "judge died")
    assert final.state == "infra_error" and final.attempts == 2
    assert final.result == {"status": "infra_error", "reward": None, "retryable": True,
                            "message": "judge died (after 2 attempts)"}


def test_a_restarted_service_queues_what_was_running(tmp_path: Path) -> None:
    store = RequestStore(tmp_path / "q.db", max_attempts=3)
    for rid in ("a", "b", "c"):
        store.submit(rid, "d", "t", deadline=None)
    store.claim("s")
    store.claim("s")
    store.close()  # the service dies with two evaluations running
    again = RequestStore(tmp_path / "q.db", max_attempts=3)
    assert sorted(again.recover()) == ["a", "b"]
    assert {again.get(r).state for r in ("a", "b", "c")} == {"queued"}
    assert again.counts() == {"queued": 3}


def test_every_state_is_terminal_or_active() -> None:
    assert {"scored", "candidate_failure", "task_error", "infra_error", "cancelled",
                        "expired"} == TERMINAL


def test_old_terminal_requests_are_pruned_and_active_ones_never(store: RequestStore) -> None:
    for rid in ("judged", "running", "waiting"):
        store.submit(rid, "d", "t", deadline=None)
    assert store.claim("s").id == "judged"
    store.finish("judged", "scored", {"reward": 1.0})
    assert store.claim("s").id == "running"
    assert store.prune(older_than_s=3600) == 0  # ended just now
    assert store.prune(older_than_s=-1) == 1
    assert store.get("judged") is None
    assert (store.get("running").state, store.get("waiting").state) == ("running", "queued")


def test_the_same_blame_in_every_attempt_ends_as_the_candidates_failure(
        store: RequestStore) -> None:
    for rid in ("a", "b"):
        store.submit(rid, "d", "t", deadline=None)
    for blames in (["interference", "interference"], ["interference", None]):
        rid = "a" if blames[1] else "b"
        for blame in blames:
            assert store.claim("s").id == rid
            store.retry(rid, "the baseline ran 5% slower", blame)
    a, b = store.get("a"), store.get("b")
    assert a.state == "candidate_failure" and a.result["failure"]["kind"] == "interference"
    assert a.result["reward"] == 0.0
    assert b.state == "infra_error" and b.result["reward"] is None


def test_a_queue_made_before_blames_were_kept_is_opened_and_used(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA.replace(",\n    blames TEXT NOT NULL DEFAULT '[]'", ""))
    assert "blames" not in {row[1] for row in db.execute("PRAGMA table_info(requests)")}
    db.execute("INSERT INTO requests (id, digest, task, state, created) "
               "VALUES ('old', 'd', 't', 'queued', 1.0)")
    db.commit()
    db.close()
    store = RequestStore(path, max_attempts=1)
    assert store.claim("s").id == "old"
    assert store.retry("old", "GPU lost", "interference").state == "infra_error"  # one attempt


def test_a_retried_request_waits_longer_after_each_attempt(tmp_path: Path) -> None:
    # A fault that ends every attempt at once (no descriptors left) must not use them all in a
    # second: the second attempt waits 0.2 s here, the third 0.8 s.
    store = RequestStore(tmp_path / "q.db", max_attempts=3, retry_wait_s=0.2)
    store.submit("a", "d", "t", deadline=None)
    store.claim("s")
    assert store.retry("a", "no file descriptors").state == "queued"
    assert store.claim("s") is None
    time.sleep(0.25)
    assert store.claim("s").attempts == 2
    store.retry("a", "no file descriptors")
    time.sleep(0.25)
    assert store.claim("s") is None
    time.sleep(0.6)
    assert store.claim("s").attempts == 3
    assert store.retry("a", "no file descriptors").state == "infra_error"


def test_expiry_names_what_it_expired(store: RequestStore) -> None:
    store.submit("late", "d", "t", deadline=time.time() - 1)
    store.submit("in_time", "d", "t", deadline=time.time() + 60)
    assert store.expire() == ["late"]
    assert store.get("late").state == "expired" and store.get("in_time").state == "queued"
    assert store.expire() == []
    assert store.ids_with_files() == ["in_time"]
