"""The reward service over HTTP: what a trainer's client sees for each outcome and each
misuse (the evaluations are scripted: conftest.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from aka_core.api import AsyncServiceClient, ServiceClient, ServiceError

from .conftest import ServiceProcess, candidate

pytestmark = pytest.mark.slow  # a service process and one process per evaluation
TASK = "triton2triton/gelu"


def test_each_outcome_has_its_status_and_only_judged_ones_a_reward(service: ServiceProcess
                                                                   ) -> None:
    with ServiceClient(service.url) as client:
        scored = client.evaluate(TASK, candidate("scored", reward=2.5))
        assert (scored["status"], scored["reward"], scored["speedup"], scored["retryable"]) == (
            "scored", 2.5, 2.5, False)
        assert scored["record"]["evaluation"]["performance"]["measured"] is True
        failed = client.evaluate(TASK, candidate("fail"), record=False)
        assert (failed["status"], failed["reward"], failed["failure"]["kind"]) == (
            "candidate_failure", 0.0, "correctness")
        assert "record" not in failed
        task = client.evaluate(TASK, candidate("task"))
        assert (task["status"], task["reward"]) == ("task_error", None)
        # Evaluator faults are retried; a fault that persists is reported, never as a zero.
        flaky = client.evaluate(TASK, candidate("infra_once", reward=1.2))
        assert (flaky["status"], flaky["reward"]) == ("scored", 1.2)
        assert client.get(flaky["id"])["attempts"] == 2
        broken = client.evaluate(TASK, candidate("infra"))
        assert (broken["status"], broken["reward"], broken["retryable"]) == (
            "infra_error", None, True)
        assert "after 3 attempts" in broken["message"]
        # The interference check's retry, read in every attempt on the same memory, is the
        # candidate's doing (drift does not repeat); on new memory it stays the evaluator's.
        band = client.evaluate(TASK, candidate("band"))
        assert (band["status"], band["reward"], band["failure"]["kind"]) == (
            "candidate_failure", 0.0, "interference")
        assert client.get(band["id"])["attempts"] == 3 and "each of 3 attempts" in band["message"]
        drift = client.evaluate(TASK, candidate("band", placement="new"))
        assert (drift["status"], drift["reward"]) == ("infra_error", None)
        crashed = client.evaluate(TASK, candidate("crash"))
        assert crashed["status"] == "infra_error"
        assert "ended without a result (exit status 3)" in crashed["message"]


def test_an_id_is_one_request_whatever_the_client_repeats(service: ServiceProcess) -> None:
    with ServiceClient(service.url) as client:
        first = client.evaluate(TASK, candidate("scored", reward=1.1, sleep=0.2), id="rollout-7")
        again = client.submit(TASK, candidate("scored", reward=1.1, sleep=0.2), id="rollout-7")
        assert again["state"] == "scored" and again["result"]["reward"] == first["reward"]
        assert again["attempts"] == 1
        with pytest.raises(ServiceError) as refused:
            client.submit(TASK, candidate("scored", reward=9.0), id="rollout-7")
        assert refused.value.status == 409 and refused.value.field == "id"


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"task": "no/such_task", "files": {"kernel.py": "x"}}, 404, "task"),
    ({"task": "../tasks/triton2triton/gelu", "files": {"kernel.py": "x"}}, 400, "task"),
    ({"task": TASK}, 422, "files"),
    ({"task": TASK, "files": {"/etc/passwd": "x"}}, 422, "files"),
    ({"task": TASK, "files": {"a/../../kernel.py": "x"}}, 422, "files"),
    ({"task": TASK, "files": {"notes.md": "x"}}, 422, "files"),
    ({"task": TASK, "files": {"kernel.py": 3}}, 422, "files.kernel.py"),
    ({"task": TASK, "files_base64": {"kernel.py": "***"}}, 422, "files_base64.kernel.py"),
    ({"task": TASK, "files": {"kernel.py": "x"}, "deadline_s": -1}, 422, "deadline_s"),
    ({"task": TASK, "files": {"kernel.py": "x"}, "deadline_s": float("inf")}, 400, None),
    ({"task": TASK, "files": {"kernel.py": "x"}, "priority": "high"}, 422, "priority"),
    ({"task": TASK, "files": {"kernel.py": "x"}, "id": "a b"}, 400, "id"),
    ({"task": TASK, "files": {"kernel.py": "x" * (17 * 2**20)}}, 413, "files"),
    ([1, 2], 400, None),
    ({"task": "triton2triton/" + "g" * 300, "files": {"kernel.py": "x"}}, 404, "task"),
])
def test_a_request_that_cannot_be_accepted_says_which_field(service: ServiceProcess, body: object,
                                                            status: int, field: str | None
                                                            ) -> None:
    try:
        response = httpx.post(service.url + "/v1/evaluations", json=body, timeout=30,
                              headers=service.headers)
    except ValueError:  # inf is not JSON: send it as a Python client would not
        response = httpx.post(service.url + "/v1/evaluations", timeout=30,
                              content=b'{"task": "x", "deadline_s": Infinity',
                              headers=service.headers)
    assert response.status_code == status, response.text
    assert response.json()["field"] == field
    assert response.json()["error"]


def test_deadlines_cancellation_and_a_full_queue(make_service: object, tmp_path: Path) -> None:
    svc = make_service(workers=1, max_queue=1)  # type: ignore[operator]
    with ServiceClient(svc.url, retries=0) as client:
        # A deadline is for starting: a running evaluation is not cut by it (a candidate that
        # hangs must end as its own timeout, a zero, not as an expired request).
        running = client.submit(TASK, candidate("hang"), deadline_s=2)
        deadline = time.monotonic() + 20
        while not svc.jobs() and time.monotonic() < deadline:
            time.sleep(0.05)
        queued = client.submit(TASK, candidate("scored"), id="waits", deadline_s=2)
        with pytest.raises(ServiceError) as full:
            client.submit(TASK, candidate("scored", reward=3.0))
        assert full.value.status == 429
        response = httpx.post(svc.url + "/v1/evaluations", timeout=30, headers=svc.headers,
                              json={"task": TASK, "files": candidate("scored", reward=4.0)})
        assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1
        expired = client.wait(queued["id"], timeout=30)  # expires while the slot is busy
        assert expired["state"] == "expired" and expired["result"]["reward"] is None
        assert len(list(svc.state.glob("spool/r-*"))) == 1  # the expired one's files are gone
        assert client.get(running["id"])["state"] == "running"  # past its deadline
        pids = svc.jobs()
        assert client.cancel(running["id"])["state"] == "cancelled"
        time.sleep(1.0)
        assert not [p for p in pids if Path(f"/proc/{p}").exists()
                    and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
        assert client.get(running["id"])["state"] == "cancelled"
        assert not list(svc.state.glob("spool/r-*")) and not list(svc.state.glob("spool/.in-*"))
        assert client.evaluate(TASK, candidate("scored"))["status"] == "scored"


def test_the_asyncio_client_and_long_polls(service: ServiceProcess) -> None:
    import asyncio

    async def main() -> list[dict[str, object]]:
        async with AsyncServiceClient(service.url) as client:
            return list(await asyncio.gather(*(
                client.evaluate(TASK, candidate("scored", reward=1.0 + i / 10, sleep=0.1),
                                record=False) for i in range(6))))

    results = asyncio.run(main())
    assert sorted(r["reward"] for r in results) == pytest.approx([1.0, 1.1, 1.2, 1.3, 1.4, 1.5])
    assert len({r["id"] for r in results}) == 6
    with ServiceClient(service.url) as client:
        health = client.health()
        assert health["ok"] and health["queued"] == 0
        with pytest.raises(ServiceError) as missing:
            client.get("nothing-here")
        assert missing.value.status == 404


def test_a_long_poll_is_answered_when_the_service_stops(make_service: object) -> None:
    """Stopping the service answers the long polls in flight at once with the request as it is
    (not cut off after the graceful-shutdown timeout, with an exception in the log)."""
    import threading

    svc = make_service(workers=1)  # type: ignore[operator]
    with ServiceClient(svc.url) as client:
        row = client.submit(TASK, candidate("hang"))
        answers: list[object] = []

        def poll() -> None:
            try:
                answers.append(client.get(row["id"], wait=50))
            except Exception as exc:  # the test reports what came back
                answers.append(exc)

        waiter = threading.Thread(target=poll)
        waiter.start()
        time.sleep(1.0)  # the poll is waiting in the service
        stopped = time.monotonic()
        svc.stop()
        waiter.join(timeout=30)
        elapsed = time.monotonic() - stopped
    assert not waiter.is_alive()
    assert isinstance(answers[0], dict), answers
    assert answers[0]["state"] in ("queued", "running")  # not terminal: polled again later
    assert elapsed < 4.0, f"the poll was answered {elapsed:.1f} s after the stop"
    log = (svc.tmp / "service.log").read_text()
    assert "Exception in ASGI application" not in log and "Cancel" not in log, log[-2000:]


def test_aka_eval_through_a_running_service(make_service: object, tmp_path: Path) -> None:
    """`aka eval --service STATE` sends the candidate folder to the running service and prints
    its record; what the service cannot honour is refused; an evaluator fault exits 3."""
    import json
    import subprocess
    import sys

    svc = make_service(workers=1, max_attempts=1)  # type: ignore[operator]
    root = Path(__file__).resolve().parents[2]

    def aka_eval(files: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
        folder = tmp_path / f"cand{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        return subprocess.run([sys.executable, "-m", "aka_core.cli", "eval",
                               str(root / "tasks" / TASK), "--candidate", str(folder),
                               "--service", str(svc.state), *extra],
                              capture_output=True, text=True, timeout=120, check=False)

    scored = aka_eval(candidate("scored", reward=1.7), "--json")
    assert scored.returncode == 0, scored.stderr
    record = json.loads(scored.stdout)
    assert record["score"] == 1.7 and record["speedup_ratio"] == 1.7
    refused = aka_eval(candidate("scored"), "--no-timing")
    assert refused.returncode != 0 and "--no-timing cannot be used with --service" in refused.stderr
    faulty = aka_eval(candidate("infra"))
    assert faulty.returncode == 3, (faulty.stdout, faulty.stderr)
    assert "not judged by the service" in faulty.stderr and "infra_error" in faulty.stderr
    gone = subprocess.run([sys.executable, "-m", "aka_core.cli", "eval", str(root / "tasks" / TASK),
                           "--candidate", str(tmp_path), "--service", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert gone.returncode != 0 and "no service runs with state folder" in gone.stderr


def test_aka_eval_through_a_service_needs_no_httpx(service: ServiceProcess, tmp_path: Path
                                                   ) -> None:
    """The blocking client speaks HTTP through the standard library: `aka eval --service`, run
    per sample, imports no httpx (its import and TLS set-up were most of the CLI's own time)."""
    import subprocess
    import sys

    folder = tmp_path / "rollout"  # tmp_path also holds the service's state
    folder.mkdir()
    (folder / "kernel.py").write_text(candidate(reward=1.25)["kernel.py"])
    code = ("import sys; sys.modules['httpx'] = None\n"
            "from aka_core.cli import main\n"
            f"sys.exit(main(['eval', 'tasks/{TASK}', '--candidate', {str(folder)!r}, "
            f"'--service', {service.url!r}, '--json']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["score"] == 1.25
