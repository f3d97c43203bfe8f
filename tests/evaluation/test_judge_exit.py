"""A judge that sent its record is not waited for: its scratch folder goes at once and its exit
(its CUDA context's teardown, 0.2 s of every request on an H200) is reaped by a thread. Any other
close waits for the exit before it removes the folder."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from aka_core.evaluation import evaluate


class HeldExit(subprocess.Popen):
    """A process whose exit is not collected before ``release`` is set (as a judge's exit is
    not, for its CUDA context's teardown)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.release = threading.Event()

    def wait(self, timeout: float | None = None) -> int:  # type: ignore[override]
        self.release.wait(30)
        return super().wait(timeout)


def started() -> evaluate.StartedJudge:
    """A stand-in judge: a process of its own session (as the real one) that never exits alone."""
    proc = HeldExit([sys.executable, "-c", "import time; time.sleep(60)"],
                    stdin=subprocess.PIPE, start_new_session=True)
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    reader = threading.Thread(target=os.read, args=(read_fd, 1), daemon=True)
    reader.start()
    scratch = tempfile.TemporaryDirectory(prefix="aka-eval-test-")
    (Path(scratch.name) / "baseline").mkdir()
    (Path(scratch.name) / "baseline" / "cache.bin").write_bytes(b"x" * 1000)
    return evaluate.StartedJudge(proc=proc, messages=queue.Queue(), reader=reader,
                                 scratch=scratch, log_path=Path(scratch.name) / "judge.log",
                                 env=None, python=sys.executable)


def test_a_settled_judge_is_reaped_behind_the_caller() -> None:
    judge = started()
    folder = Path(judge.scratch.name)
    judge.close(settled=True)
    assert judge.proc.returncode is None  # the exit is not waited for in the call
    assert not folder.exists()  # removed at once: nothing of the judge writes there any more
    judge.proc.release.set()
    deadline = time.monotonic() + 10
    while judge.proc.returncode is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the reaper thread's wait sets it
    assert judge.proc.returncode == -9


def test_any_other_close_waits_for_the_exit() -> None:
    judge = started()
    folder = Path(judge.scratch.name)
    judge.proc.release.set()
    judge.close()
    assert judge.proc.returncode == -9  # waited for, in the call
    assert not folder.exists()


def test_evaluate_settles_only_a_judge_that_sent_its_record(
        monkeypatch: pytest.MonkeyPatch) -> None:
    closes: list[bool] = []

    class Judge:
        def __init__(self) -> None:
            self.proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)
            self.messages: queue.Queue = queue.Queue()
            self.log_path = Path(tempfile.gettempdir()) / "aka-test-judge.log"

        def close(self, *, settled: bool = False) -> None:
            closes.append(settled)

    monkeypatch.setattr(evaluate, "_take_offered", lambda python, env: Judge())
    request = object.__new__(evaluate.EvaluationRequest)
    monkeypatch.setattr(evaluate.attrs, "evolve", lambda req, **kw: req)
    monkeypatch.setattr(evaluate.EvaluationRequest, "to_json", lambda self: {}, raising=False)
    for result, failure, settled in (({"phases": {}}, None, True),
                                     (None, {"kind": "infra_error"}, False)):
        watch = evaluate._JudgeProgress()
        watch.result = result
        monkeypatch.setattr(evaluate, "_watch", lambda proc, req, msgs, w=watch, f=failure: (w, f))
        evaluate.evaluate(request)
        assert closes[-1] is settled
