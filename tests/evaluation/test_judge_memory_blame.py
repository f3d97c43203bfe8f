"""Whose fault an out-of-memory error in the task's own code is: tested by killing the candidate.

A candidate that grabs the GPU's memory at import made the judge's reference fail with
``OutOfMemoryError``, which was the task's error (status ``error``: no candidate failure for the
policy to learn from). The judge now kills the candidate's processes and calls the task's code
again: it runs -> the candidate's ``resources`` failure; it fails again -> the task's error.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from aka_core.evaluation import judge as judge_module
from aka_core.evaluation import sides
from aka_core.evaluation.failures import FailureKind, JudgeFailure


class FakeProc:
    pid = 11


class FakeRunner:
    def __init__(self, events: list[str], name: str):
        self.events, self.name, self.dead, self.proc = events, name, False, FakeProc()

    def kill(self) -> None:
        self.events.append(f"{self.name} killed")
        self.dead = True


class Case:
    name = "large"
    params: dict[str, Any] = {"n": 4}


def judge_with(monkeypatch: pytest.MonkeyPatch, events: list[str], *, device: str = "cuda"
               ) -> Any:
    monkeypatch.setattr(sides, "kill_orphans_and_wait",
                        lambda keep: events.append(f"orphans, kept {keep}") or True)
    judge: Any = judge_module.Judge.__new__(judge_module.Judge)
    judge.device = device
    judge.runners = {"baseline": FakeRunner(events, "baseline"),
                     "candidate": FakeRunner(events, "candidate")}
    judge.task_code_seconds = lambda: 5.0
    judge.result = {"device_memory": {"shared": False}}
    return judge


def oom() -> BaseException:
    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB")


def test_memory_the_candidate_held_is_its_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    judge = judge_with(monkeypatch, events)

    def reference(x: Any) -> Any:
        if not judge.runners["candidate"].dead:
            raise oom()
        return x * 2

    judge.reference = reference
    with pytest.raises(JudgeFailure) as caught:
        judge.reference_outputs(Case(), {"x": torch.ones(3)})
    assert caught.value.kind == FailureKind.RESOURCES
    assert "while the candidate's process held it" in str(caught.value)
    assert events[:2] == ["candidate killed", "orphans, kept {11}"]


def test_memory_the_task_needs_is_the_tasks_error(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    judge = judge_with(monkeypatch, events)

    def make_inputs(params: dict[str, Any], seed: int, device: str) -> Any:
        raise oom()  # with or without the candidate

    judge.make_inputs = make_inputs
    with pytest.raises(JudgeFailure) as caught:
        judge.inputs_for(Case(), 1)
    assert caught.value.kind == FailureKind.TASK_ERROR
    assert "candidate killed" in events  # the test was made


def test_the_inputs_factory_is_tested_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    judge = judge_with(monkeypatch, events)

    def make_inputs(params: dict[str, Any], seed: int, device: str) -> Any:
        if not judge.runners["candidate"].dead:
            raise oom()
        return {"x": torch.ones(params["n"])}

    judge.make_inputs = make_inputs
    with pytest.raises(JudgeFailure) as caught:
        judge.inputs_for(Case(), 1)
    assert caught.value.kind == FailureKind.RESOURCES


def test_a_gpu_others_were_using_is_the_evaluators_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    judge = judge_with(monkeypatch, events)
    judge.result = {"device_memory": {"shared": True}}  # less than half free at the start

    def reference(x: Any) -> Any:
        raise oom()  # with or without the candidate

    judge.reference = reference
    with pytest.raises(JudgeFailure) as caught:
        judge.reference_outputs(Case(), {"x": torch.ones(3)})
    assert caught.value.kind == FailureKind.INFRA_ERROR
    assert "candidate killed" in events


@pytest.mark.parametrize("device, error", [("cpu", oom()), ("cuda", ValueError("bad shape"))])
def test_other_errors_and_the_cpu_stay_the_tasks(monkeypatch: pytest.MonkeyPatch, device: str,
                                                  error: BaseException) -> None:
    events: list[str] = []
    judge = judge_with(monkeypatch, events, device=device)

    def reference(x: Any) -> Any:
        raise error

    judge.reference = reference
    with pytest.raises(JudgeFailure) as caught:
        judge.reference_outputs(Case(), {"x": torch.ones(3)})
    assert caught.value.kind == FailureKind.TASK_ERROR
    assert events == []  # nobody was killed


def test_orphans_are_waited_for_until_gone() -> None:
    """A child the candidate left holding GPU memory is killed and waited for until its exit is
    complete: here a real orphan, in a process of its own made a subreaper (as the judge is)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import os, subprocess, sys, time
        from aka_core.evaluation import sides
        from aka_core.processes import descendants
        sides.become_subreaper()
        # A grandchild that outlives its parent: it becomes this process's child.
        subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen("
                        "[sys.executable, '-c', 'import time; time.sleep(60)'])"], check=True)
        before = len(descendants(os.getpid()))
        started = time.monotonic()
        gone = sides.kill_orphans_and_wait(set(), timeout=5.0)
        print(before, gone, len(descendants(os.getpid())), round(time.monotonic() - started, 2))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    before, gone, after, seconds = done.stdout.split()
    assert int(before) >= 1 and gone == "True" and int(after) == 0 and float(seconds) < 5


@pytest.mark.parametrize(("shared", "kind"), [(False, FailureKind.RESOURCES),
                                              (True, FailureKind.INFRA_ERROR)])
def test_slots_that_do_not_fit_beside_the_candidate_are_judged_as_its_memory(
        monkeypatch: pytest.MonkeyPatch, shared: bool, kind: FailureKind) -> None:
    # A candidate holding all but a sliver of the GPU left no room for a case's timing slots:
    # that was a retry (infra_error) every time, a penalty dodged; now it is judged as any
    # out-of-memory error while the candidate lives.
    from aka_core.evaluation import timing

    judge = judge_with(monkeypatch, [])
    judge.result["device_memory"]["shared"] = shared
    timer: Any = timing.CaseTimer.__new__(timing.CaseTimer)
    timer.judge, timer.case, timer.region, timer.out_bytes = judge, Case(), 2**28, 2**28
    assert timer.calls_that_fit(16 * 2**30) == 4  # 40% of 16 GiB, 1.5 GiB a call
    with pytest.raises(JudgeFailure) as short:
        timer.calls_that_fit(2**30)
    assert short.value.kind == kind and "to time case large" in str(short.value)
