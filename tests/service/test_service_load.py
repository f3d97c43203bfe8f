"""The reward service under load, with faults: every accepted id ends in exactly one terminal
state, nothing is lost, and nothing is judged differently for having been through a fault.

500 requests (``AKA_SERVICE_LOAD_REQUESTS``), 32 in flight from an asyncio client, 6 slots and a
queue of 48 (so clients meet 429s), scripted evaluations (conftest.py) of mixed outcomes. While it
runs: evaluation processes are killed from outside, the service is SIGKILLed with requests
queued and running and started again on the same port and state, and a client drops its
connection in the middle of a long poll.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from aka_core.api import AsyncServiceClient, ServiceClient

from .conftest import ServiceProcess, candidate

pytestmark = pytest.mark.slow
TASK = "triton2triton/gelu"
REQUESTS = int(os.environ.get("AKA_SERVICE_LOAD_REQUESTS", "500"))
IN_FLIGHT = 32


def plan(n: int) -> list[tuple[str, dict[str, object], str]]:
    """(id, candidate, the status it must end in)."""
    rng = random.Random(7)
    requests = []
    for i in range(n):
        roll = rng.random()
        sleep = round(rng.uniform(0.0, 0.15), 3)
        if roll < 0.70:
            requests.append((f"r{i}", candidate("scored", reward=1 + i / 1000, sleep=sleep), "scored"))
        elif roll < 0.85:
            requests.append((f"r{i}", candidate("fail", sleep=sleep), "candidate_failure"))
        elif roll < 0.95:
            requests.append((f"r{i}", candidate("infra_once", reward=2 + i / 1000, sleep=sleep),
                             "scored"))
        else:
            requests.append((f"r{i}", candidate("infra", sleep=sleep), "infra_error"))
    return requests


def test_load_with_killed_workers_a_restarted_service_and_a_client_that_leaves(
        make_service: object, tmp_path: Path) -> None:
    svc: ServiceProcess = make_service(workers=6, max_queue=48, max_attempts=3)  # type: ignore[operator]
    requests = plan(REQUESTS)
    results: dict[str, dict[str, object]] = {}
    faults = Counter()
    done = threading.Event()

    def inject() -> None:
        """Kill evaluation processes now and then; once, kill and restart the whole service."""
        restarted = False
        while not done.is_set():
            time.sleep(0.7)
            if svc.proc is None or svc.proc.poll() is not None:
                continue
            # Not the leaving client's request: it must be judged (asserted below), and a request
            # killed more often than it may be retried ends as an infra_error.
            jobs = [pid for pid in svc.jobs() if not _runs_request(pid, "left")]
            if jobs and faults["killed_job"] < 8:
                try:
                    os.kill(random.choice(jobs), 9)
                    faults["killed_job"] += 1
                except ProcessLookupError:  # it ended between the listing and the kill
                    pass
            if not restarted and len(results) > REQUESTS // 3:
                svc.kill()  # queued and running requests in its database
                faults["service_killed"] += 1
                time.sleep(1.0)  # clients meet a closed port meanwhile
                svc.start()
                restarted = True

    async def main() -> None:
        limit = asyncio.Semaphore(IN_FLIGHT)
        async with AsyncServiceClient(svc.url, retries=12) as client:

            async def one(request_id: str, files: dict[str, object]) -> None:
                async with limit:
                    result = await client.evaluate(TASK, files, id=request_id,  # type: ignore[arg-type]
                                                   record=False)
                    results[request_id] = result

            await asyncio.gather(*(one(rid, files) for rid, files, _ in requests))

    injector = threading.Thread(target=inject, daemon=True)
    injector.start()
    # A client that leaves in the middle of a long poll: its request is still judged.
    with ServiceClient(svc.url) as leaving:
        leaving.submit(TASK, candidate("scored", reward=7.0, sleep=0.5), id="left")
    with pytest.raises(httpx.TimeoutException):
        httpx.get(svc.url + "/v1/evaluations/left", params={"wait": "30"}, timeout=0.2,
                  headers=svc.headers)
    started = time.monotonic()
    asyncio.run(main())
    elapsed = time.monotonic() - started
    done.set()
    injector.join(timeout=10)
    assert faults["service_killed"] == 1 and faults["killed_job"] >= 1, faults

    expected = {rid: status for rid, _, status in requests}
    assert set(results) == set(expected)
    wrong = {rid: (results[rid]["status"], results[rid].get("message"), status)
             for rid, status in expected.items() if results[rid]["status"] != status}
    # A request whose evaluation was killed more often than it may be retried is an
    # infra_error: that is the right answer for it, and the only tolerated difference.
    assert all(got == "infra_error" for got, _, _ in wrong.values()), wrong
    assert len(wrong) <= faults["killed_job"] + 8, wrong
    for rid in expected:
        result = results[rid]
        if result["status"] == "scored":
            assert result["reward"] is not None and result["reward"] >= 1.0
        elif result["status"] == "candidate_failure":
            assert result["reward"] == 0.0
        else:
            assert result["reward"] is None and result["retryable"] is True
    with ServiceClient(svc.url) as client:
        assert client.wait("left", timeout=60)["result"]["reward"] == 7.0
        # Terminal means final: asked again, every id answers what its client was told.
        for rid, result in results.items():
            again = client.get(rid, record=False)
            assert again["terminal"] and again["result"]["status"] == result["status"]
            assert again["result"]["reward"] == result["reward"]
        health = client.health()
    assert health["queued"] == 0 and health["running"] == 0
    # Each request scored was judged (by the scripted evaluator) and recorded once per attempt
    # that reached it: no id is missing from the log, none finished more times than attempts.
    finished = Counter(line.split()[0] for line in svc.log.read_text().splitlines())
    scored = [rid for rid, r in results.items() if r["status"] in ("scored", "candidate_failure")]
    assert all(finished[spool_name(rid)] >= 1 for rid in scored)
    print(f"\n{REQUESTS} requests in {elapsed:.1f} s ({REQUESTS / elapsed:.1f}/s), "
          f"faults {dict(faults)}, statuses {Counter(r['status'] for r in results.values())}")


def _runs_request(pid: int, request_id: str) -> bool:
    """Whether evaluation process ``pid`` evaluates ``request_id`` (its spec is in the
    request's spool folder)."""
    try:
        return f"/{spool_name(request_id)}/".encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def spool_name(request_id: str) -> str:
    """The name of a request's folder in the spool (``Scheduler.folder``), which the scripted
    evaluator logs as the request's."""
    return "r-" + hashlib.sha256(request_id.encode()).hexdigest()[:32]
