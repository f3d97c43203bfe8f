"""A reward service in a process of its own, evaluating with a scripted evaluator.

The scripted evaluator is a real module the service's job processes import (``evaluator=``),
so queueing, HTTP, processes, retries, deadlines and restarts are all the service's own; only the
judge is replaced, by a function whose candidate file says what it should do::

    # {"sleep": 0.1, "outcome": "scored", "reward": 1.5}

outcomes: scored, fail (a correctness failure: ``message`` and ``err``, its worst error, as
given), task (a task error), infra (always an evaluator
fault), infra_once (a fault on the first attempt only), band (the interference check's retry,
``placement`` as given), crash (the process dies without a result), hang (sleeps until killed).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aka_core.service import access_token

ROOT = Path(__file__).resolve().parents[2]

FAKE_EVALUATOR = textwrap.dedent('''
    import json, os, time
    from pathlib import Path


    def evaluate(task_dir, candidate_dir, device="auto", held_out_seed=None, protect=()):
        candidate = Path(candidate_dir)
        request_id = candidate.parent.name  # the spool folder: a digest of the id
        spec = json.loads((candidate / "kernel.py").read_text().split("#", 1)[1].split("\\n")[0])
        attempts = candidate.parent / "fake-attempts"
        count = int(attempts.read_text()) + 1 if attempts.exists() else 1
        attempts.write_text(str(count))
        if os.environ.get("AKA_FAKE_SEEDS"):  # the held-out draw each attempt was given
            with open(os.environ["AKA_FAKE_SEEDS"], "a") as handle:
                handle.write(f"{request_id} {count} {held_out_seed}\\n")
        time.sleep(float(spec.get("sleep", 0)))
        outcome = spec.get("outcome", "scored")
        if outcome == "crash":
            os._exit(3)
        if outcome == "hang":
            time.sleep(3600)
        if outcome == "infra" or (outcome == "infra_once" and count == 1):
            return {"status": "infra_error", "score": 0.0,
                    "evaluation": {"failure": {"kind": "infra_error", "message": "GPU lost"}}}
        if outcome == "band":  # the baseline slower beside the candidate, too little to blame
            clocks = {"sm_mhz": 1980.0, "clock_event_reasons": "0x0000000000000000"}
            return {"status": "infra_error", "score": 0.0, "evaluation": {
                "performance": {"gpu_state": {"start": clocks, "pairs_end": clocks,
                                              "end": clocks}},
                "failure": {"kind": "infra_error",
                            "message": "case c1: the baseline ran 5.0% slower; retry",
                            "cause": "interference_band",
                            "placement": spec.get("placement", "same")}}}
        log = os.environ.get("AKA_FAKE_LOG")
        if log:
            with open(log, "a") as handle:
                handle.write(f"{request_id} {count}\\n")
        if outcome == "fail":
            return {"status": "completed", "score": 0.0, "pass_compilation": True,
                    "pass_correctness": False, "evaluation": {"failure": {
                        "kind": "correctness", "case": "c1",
                        "message": spec.get("message", "wrong on case c1")},
                        "correctness": {"checks": [{"case": "c1", "passed": False,
                                                    "max_abs_err": float(spec.get("err", 1))}]}}}
        if outcome == "task":
            return {"status": "completed", "score": 0.0, "evaluation": {"failure": {
                "kind": "task_error", "message": "the baseline does not build"}}}
        reward = float(spec.get("reward", 1.0))
        return {"status": "completed", "score": reward, "candidate_accepted": True,
                "pass_correctness": True, "speedup_ratio": reward,
                "evaluation": {"performance": {"measured": True, "speedup": reward,
                                               "ci95": [reward * 0.99, reward * 1.01]}}}
''')


def candidate(outcome: str = "scored", **fields: object) -> dict[str, str]:
    """The files of a scripted candidate."""
    return {"kernel.py": "# " + json.dumps({"outcome": outcome, **fields}) + "\n"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def service_token(monkeypatch: pytest.MonkeyPatch) -> str:
    """The access token the tests' services ask for and their clients send (``access_token``:
    from the environment, so that no test writes one into the home folder)."""
    token = secrets.token_urlsafe(24)
    monkeypatch.setenv(access_token.ENV, token)
    return token


class ServiceProcess:
    """``aka serve``'s ``serve()`` in a child process (killable, restartable on its port)."""

    def __init__(self, tmp: Path, *, workers: int = 2, max_queue: int = 1024,
                 max_attempts: int = 3, evaluation_seconds: float = 600.0,
                 evaluator: str | None = "aka_fake_evaluator:evaluate",
                 prestart: bool | None = None):
        self.tmp = tmp
        self.state = tmp / "state"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "fake-log.txt"
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "aka_fake_evaluator.py").write_text(FAKE_EVALUATOR)
        self.options = dict(tasks_root=str(ROOT / "tasks"), state=str(self.state), port=self.port,
                            cpu_workers=workers, max_queue=max_queue, max_attempts=max_attempts,
                            evaluation_seconds=evaluation_seconds, evaluator=evaluator,
                            prestart=prestart)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def headers(self) -> dict[str, str]:
        """What a raw HTTP request to this service sends to be let in."""
        return access_token.header(os.environ[access_token.ENV])

    def start(self) -> ServiceProcess:
        code = ("import asyncio, json, sys\nfrom pathlib import Path\n"
                "from aka_core.service.server import ServeOptions, serve\n"
                "o = json.loads(sys.argv[1])\n"
                "o['tasks_root'] = Path(o['tasks_root']); o['state'] = Path(o['state'])\n"
                "asyncio.run(serve(ServeOptions(**o)))\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(self.tmp), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "AKA_FAKE_LOG": str(self.log), "AKA_FAKE_SEEDS": str(self.tmp / "fake-seeds.txt")}
        with contextlib.suppress(OSError):
            (self.state / "service.json").unlink()
        self.proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(self.options)],
                                     env=env, stdout=subprocess.DEVNULL,
                                     stderr=open(self.tmp / "service.log", "ab"))  # noqa: SIM115
        deadline = time.monotonic() + 60
        while not (self.state / "service.json").is_file():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the service did not start: "
                                   + (self.tmp / "service.log").read_text()[-3000:])
            time.sleep(0.05)
        return self

    def jobs(self) -> list[int]:
        """Pids of the evaluation processes the service runs now."""
        assert self.proc is not None
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == self.proc.pid and b"aka_core.service.job" in (
                        entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
        return found

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(tmp_path).start()
    yield svc
    svc.stop()


@pytest.fixture
def make_service(tmp_path: Path) -> Iterator[object]:
    made: list[ServiceProcess] = []

    def make(**options: object) -> ServiceProcess:
        svc = ServiceProcess(tmp_path / f"svc{len(made)}", **options)  # type: ignore[arg-type]
        svc.tmp.mkdir(parents=True, exist_ok=True)
        made.append(svc)
        return svc.start()

    yield make
    for svc in made:
        svc.stop()
