"""Red team, the reward service's requests: what a client (or a policy whose response becomes a
request's files) can send to make the service lose, mix up or misjudge requests.

Each case sends what once did harm and checks that it is refused with a 4xx naming the field,
that nothing is left in the spool, and that the requests around it are judged as they should be.
The evaluations are scripted (tests/service/conftest.py): the service, its queue, its files and
its processes are the real ones."""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from aka_core.service import client as client_module
from aka_core.service.client import ServiceClient, files_of
from aka_core.service.store import RequestStore

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

TASK = "triton2triton/gelu"


def _service_fixtures() -> Any:
    spec = importlib.util.spec_from_file_location(
        "aka_redteam_service_conftest", Path(__file__).parents[1] / "service" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fixtures = _service_fixtures()
candidate = fixtures.candidate
service_token = fixtures.service_token  # autouse: the access token of the service and clients


@pytest.fixture
def service(tmp_path: Path) -> Any:
    svc = fixtures.ServiceProcess(tmp_path).start()
    yield svc
    svc.stop()


def post(svc: Any, body: Any = None, **kwargs: Any) -> Any:
    kwargs["headers"] = {**svc.headers, **kwargs.get("headers", {})}
    return httpx.post(svc.url + "/v1/evaluations", json=body, timeout=60, **kwargs)


def spool_leftovers(svc: Any) -> list[str]:
    return sorted(p.name for p in (svc.state / "spool").iterdir()
                  if p.name != "_standby") if (svc.state / "spool").is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize(("request_id", "accepted"), [
    ("..", True), (".", True), ("abc\n", False), ("a/b", False)])
def test_an_id_is_never_a_path(service: Any, request_id: str, accepted: bool) -> None:
    # ".." once made the request's folder the service's state folder: judged, it was removed
    # with the queue's database in it; "." the spool with every queued candidate's files. Now a
    # request's folder is named by a digest of its id; an id with a final newline (which "$"
    # let through) is refused.
    with ServiceClient(service.url) as client:
        queued = client.submit(TASK, candidate("scored", reward=1.5, sleep=1.0))
        response = post(service, {"task": TASK, "files": candidate("scored", reward=0.25),
                                  "id": request_id})
        if accepted:
            assert response.status_code == 201
            assert client.wait(request_id, timeout=60)["result"]["reward"] == 0.25
        else:
            assert response.status_code == 400 and response.json()["field"] == "id"
        assert client.wait(queued["id"], timeout=60)["result"]["reward"] == 1.5
        assert client.get(queued["id"])["state"] == "scored"  # the queue is still there
    assert (service.state / "queue.db").is_file()
    assert spool_leftovers(service) == []


@pytest.mark.slow
@pytest.mark.parametrize(("files", "field"), [
    ({"kernel.py": "x", "kernel.py/inner.py": "x"}, "files"),       # a file and a folder
    ({"kernel.py": "x", ("n" * 256) + ".py": "x"}, "files"),         # a name too long
    ({"kernel.py": "x", "\udcff.py": "x"}, "files"),                 # not Unicode
    ({"kernel.py": "bad \ud800 text"}, "files.kernel.py"),           # content not Unicode
])
def test_files_that_cannot_be_written_are_refused_and_leave_nothing(service: Any,
                                                                    files: dict[str, str],
                                                                    field: str) -> None:
    body = json.dumps({"task": TASK, "files": files}, ensure_ascii=True)  # \ud800 as JSON has it
    response = httpx.post(service.url + "/v1/evaluations", content=body, timeout=60,
                          headers={"content-type": "application/json", **service.headers})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    assert spool_leftovers(service) == []


@pytest.mark.slow
def test_a_body_too_deep_or_too_large_is_refused_before_it_costs_memory(service: Any) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    response = httpx.post(service.url + "/v1/evaluations", content=deep, timeout=60,
                          headers=service.headers)
    assert response.status_code == 400
    # Declared too large: refused at once, before any of it is sent.
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        token = service.headers["Authorization"].encode()
        sock.sendall(b"POST /v1/evaluations HTTP/1.1\r\nhost: x\r\ncontent-type: "
                     b"application/json\r\nauthorization: " + token + b"\r\n"
                     b"content-length: 2147483648\r\n\r\n{")
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")
    # Sent too large without a declared length (chunked): refused past the limit.
    chunk = b" " * 2**20

    def body() -> Any:
        yield b'{"task": "' + TASK.encode() + b'", "pad": "'
        for _ in range(200):
            yield chunk

    response = httpx.post(service.url + "/v1/evaluations", content=body(), timeout=60,
                          headers=service.headers)
    assert response.status_code == 413
    with ServiceClient(service.url) as client:  # and the service still judges
        assert client.evaluate(TASK, candidate("scored", reward=1.25))["reward"] == 1.25


@pytest.mark.slow
def test_a_reused_id_is_judged_on_its_new_files(service: Any) -> None:
    # A cancelled request's files stayed in the spool; once its id was forgotten (pruned) and
    # used again with other files, the new request was judged on the old ones.
    with ServiceClient(service.url) as client:
        blocker = client.submit(TASK, candidate("hang"))
        client.submit(TASK, candidate("hang"))  # the second slot
        old = client.submit(TASK, candidate("scored", reward=9.0), id="rollout-1")
        assert client.cancel("rollout-1")["state"] == "cancelled"
        assert len(spool_leftovers(service)) == 2  # the two running ones; the cancelled is gone
        store = RequestStore(service.state / "queue.db")
        assert store.prune(older_than_s=-1) == 1  # the service forgets it (keep_days)
        store.close()
        client.cancel(blocker["id"])
        new = client.evaluate(TASK, candidate("scored", reward=0.5), id="rollout-1")
        assert old["id"] == new["id"] and new["reward"] == 0.5


@pytest.mark.slow
def test_a_response_whose_files_are_refused_scores_zero_not_a_crash(service: Any,
                                                                    monkeypatch: Any) -> None:
    from aka_core.service import verl

    monkeypatch.setenv("AKA_SERVICE_URL", service.url)
    bad = "```python ../kernel.py\nimport os\n```"
    scored = verl.compute_score("aka", bad, TASK, {})
    assert (scored["score"], scored["status"], scored["failure_kind"]) == (
        0.0, "candidate_failure", "refused_files")
    huge = "```python kernel.py\n" + "x" * (17 * 2**20) + "\n```"
    good = "```python kernel.py\n" + candidate("scored", reward=2.0)["kernel.py"] + "```"
    batch = verl.compute_score_batch(["aka"] * 3, [bad, huge, good], [TASK] * 3, [{}] * 3)
    assert [(r["status"], r["score"]) for r in batch] == [
        ("candidate_failure", 0.0), ("candidate_failure", 0.0), ("scored", 2.0)]
    with pytest.raises(verl.RewardUnavailable):  # the task's fault is no zero
        verl.compute_score("aka", good, "no/such_task", {})
    # Control characters take six bytes each in JSON: 12 MiB of them, within the files' limit,
    # once made a body over the service's (a 413 naming no field) and no reward for a batch.
    scripted = candidate("scored", reward=1.25)["kernel.py"]
    escaped = "```python kernel.py\n" + scripted + "\x01" * (12 * 2**20) + "\n```"
    scored = verl.compute_score("aka", escaped, TASK, {})
    assert (scored["status"], scored["score"]) == ("scored", 1.25), scored


def test_a_file_that_json_would_inflate_goes_as_base64_within_the_body_limit() -> None:
    from aka_core.service.app import MAX_BODY_BYTES, MAX_BYTES

    files = {"kernel.py": "\x01" * (MAX_BYTES - 1), "ok.py": "x = 'é'\n",
             "bad.py": "\ud800"}
    body = client_module.request_body(TASK, files, request_id="r", deadline_s=None,
                                      priority=0, held_out_seed=None)
    assert set(body["files"]) == {"ok.py", "bad.py"}  # plain text, and the service's to name
    assert list(body["files_base64"]) == ["kernel.py"]
    assert len(json.dumps(body)) < MAX_BODY_BYTES
    from aka_core.service import verl
    from aka_core.service.client import ServiceError

    refused = verl._refused(ServiceError("the body is over 65 MiB", status=413))
    assert (refused["score"], refused["failure_kind"]) == (0.0, "refused_files")


@pytest.mark.slow
def test_a_retry_judges_the_same_held_out_draw(service: Any) -> None:
    # A candidate that can provoke an evaluator fault (a retry) once drew new held-out shapes
    # with each attempt: it could keep the draws it liked. Each request now has one secret draw.
    with ServiceClient(service.url) as client:
        first = client.evaluate(TASK, candidate("infra_once", reward=1.5))
        second = client.evaluate(TASK, candidate("infra_once", reward=2.5))
        given = client.evaluate(TASK, candidate("infra_once", reward=3.5), held_out_seed=7)
    seeds: dict[str, list[str]] = {}
    for line in (service.tmp / "fake-seeds.txt").read_text().splitlines():
        folder, _, seed = line.split()
        seeds.setdefault(folder, []).append(seed)
    draws = {folder: set(found) for folder, found in seeds.items()}
    assert sorted(len(found) for found in seeds.values()) == [2, 2, 2]  # two attempts each
    assert all(len(found) == 1 for found in draws.values())  # the same draw in both
    assert {"7"} in draws.values() and "None" not in set().union(*draws.values())
    assert len({next(iter(found)) for found in draws.values()}) == 3  # each request its own
    assert (first["reward"], second["reward"], given["reward"]) == (1.5, 2.5, 3.5)


def test_files_of_reads_no_more_than_a_request_holds(tmp_path: Path) -> None:
    # The trainer's process is not confined: a workspace's sparse file of terabytes (it costs
    # the agent nothing) must not be read into memory.
    (tmp_path / "kernel.py").write_text("x = 1\n")
    with open(tmp_path / "notes.bin", "wb") as handle:
        handle.truncate(8 * 2**40)
    with pytest.raises(ValueError, match="more than 16 MiB"):
        files_of(tmp_path)
    (tmp_path / "notes.bin").unlink()
    deep = tmp_path
    for _ in range(40):
        deep = deep / "d"
    deep.mkdir(parents=True)
    with pytest.raises(ValueError, match="nested deeper"):
        files_of(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "d")
    os.mkfifo(tmp_path / "pipe")  # never opened (a read would wait for a writer)
    assert files_of(tmp_path) == {"kernel.py": b"x = 1\n"}
    assert client_module.FILES_OF_MAX_BYTES == 16 * 2**20


@pytest.mark.parametrize("change", ["grows", "fifo_with_a_writer", "folder", "link"])
def test_files_of_reads_files_changed_after_it_listed_them_within_bounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    # The agent's processes may go on after the listing sized its files: one that grows past
    # what a request holds is refused, one that is no longer a regular file is skipped unread
    # (a FIFO held open by a writer never answers a read), a link is never followed.
    (tmp_path / "kernel.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("small\n")
    notes, held = str(tmp_path / "notes.txt"), []
    real_open = os.open

    def change_then_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == notes and not held:
            held.append(-1)
            if change == "grows":
                os.truncate(notes, 17 * 2**20)
            else:
                os.unlink(notes)
                if change == "folder":
                    os.mkdir(notes)
                elif change == "link":
                    os.symlink(tmp_path / "kernel.py", notes)
                else:
                    os.mkfifo(notes)
                    held.append(real_open(notes, os.O_RDONLY | os.O_NONBLOCK))
                    held.append(real_open(notes, os.O_WRONLY))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", change_then_open)
    try:
        if change == "grows":
            with pytest.raises(ValueError, match="its files grew past 16 MiB while read"):
                files_of(tmp_path)
        elif change == "link":
            with pytest.raises(OSError, match="symbolic links"):
                files_of(tmp_path)
        else:
            assert files_of(tmp_path) == {"kernel.py": b"x = 1\n"}
    finally:
        for fd in held[1:]:
            os.close(fd)


def test_the_service_keeps_descriptors_for_its_evaluations() -> None:
    # Connections left open (requests never finished) once took every descriptor: each
    # evaluation then failed to start, and its retries were spent within a second.
    from aka_core.service.server import connection_limit

    limit = connection_limit()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert 64 <= limit <= max(64, soft // 2)


@pytest.mark.slow
def test_a_failure_whose_text_or_figures_json_cannot_carry_is_still_read(service: Any) -> None:
    # A side writes its error's text itself, and JSON lets it escape a lone surrogate; the judge's
    # figures on its outputs may be infinite. Starlette encodes a response as UTF-8 with NaN and
    # infinities refused: such a result made every read of the request a 500, and verl's reward
    # function raised RewardUnavailable for a wrong candidate instead of scoring its zero.
    from aka_core.service import verl

    files = candidate("fail", message="wrong \ud800 here", err="inf")
    with ServiceClient(service.url) as client:
        for record in (True, False):
            result = client.evaluate(TASK, files, id=f"odd-text-{record}", record=record)
            assert result["status"] == "candidate_failure" and result["reward"] == 0.0
            assert result["failure"]["message"] == "wrong ? here"
        record = client.get("odd-text-True")["result"]["record"]
        assert record["evaluation"]["correctness"]["checks"][0]["max_abs_err"] is None, record
    response = "```python\n" + files["kernel.py"] + "```"
    scored = verl.compute_score("aka", response, TASK, {"aka_url": service.url})
    assert scored["score"] == 0.0 and scored["status"] == "candidate_failure"
