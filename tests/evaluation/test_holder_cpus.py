"""The GPU holder's CPUs: the service's split of the host's CPUs, and the judge moving its
process tree onto its GPU's CPUs and back (real processes and threads, read back from /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aka_core.evaluation import holder_cpus
from aka_core.service.scheduler import make_slots


def allowed(tid: int) -> frozenset[int]:
    for line in Path(f"/proc/{tid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return holder_cpus.parse(line.split(":", 1)[1])
    raise AssertionError(f"no Cpus_allowed_list for {tid}")


def fake_topology(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, text in siblings.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(text + "\n")
    return root


@pytest.mark.parametrize("text, cpus", [("0", {0}), ("0-3", {0, 1, 2, 3}),
                                        ("0-1,4,6-7", {0, 1, 4, 6, 7}), (" 2 , 5 ", {2, 5})])
def test_cpu_lists_read_and_write_back(text: str, cpus: set[int]) -> None:
    assert holder_cpus.parse(text) == cpus
    assert holder_cpus.parse(holder_cpus.format_list(cpus)) == cpus


@pytest.mark.parametrize("text", ["", ",", "a", "3-1", "-1"])
def test_a_bad_cpu_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        holder_cpus.parse(text)


def test_each_gpu_gets_whole_cores_from_the_top(tmp_path: Path) -> None:
    # 16 CPUs, hyper-threads paired as Linux numbers them (cpu i with cpu i + 8).
    topo = fake_topology(tmp_path, {c: f"{c % 8},{c % 8 + 8}" for c in range(16)})
    plan = holder_cpus.plan([0, 1], cpus=range(16), topology=topo)
    assert plan is not None
    assert plan.holders == {0: {7, 15, 6, 14}, 1: {5, 13, 4, 12}}
    assert plan.waiting == {0, 1, 2, 3, 8, 9, 10, 11}


def test_no_cpus_are_kept_where_the_host_has_too_few(tmp_path: Path) -> None:
    assert holder_cpus.plan([0], cpus=range(2), topology=tmp_path) is None  # a CI runner
    assert holder_cpus.plan([0], cpus=range(5), topology=tmp_path) is None  # 1 for the holder
    seven = holder_cpus.plan([0], cpus=range(7), topology=tmp_path)  # 3 kept, 4 waiting
    assert seven is not None and seven.holders[0] == {4, 5, 6} and len(seven.waiting) == 4
    assert holder_cpus.plan([], cpus=range(64), topology=tmp_path) is None  # no GPU
    assert holder_cpus.plan([0], cpus=range(64), per_gpu=0, topology=tmp_path) is None
    small = holder_cpus.plan([0, 1], cpus=range(10), topology=tmp_path)  # 3 each, 4 waiting
    assert small is not None and {len(c) for c in small.holders.values()} == {3}


def test_asking_for_more_cpus_than_the_host_has_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot give 8"):
        holder_cpus.plan([0, 1], cpus=range(16), per_gpu=8, topology=tmp_path)


def test_slots_start_on_the_waiting_cpus_and_name_their_gpus_holder_cpus(tmp_path: Path) -> None:
    plan = holder_cpus.plan([0, 1], cpus=range(16), topology=tmp_path)
    slots = make_slots(gpus=[0, 1], per_gpu=2, cpu_workers=1, cpu_plan=plan)
    assert plan is not None and len(slots) == 4
    assert {s.cpus for s in slots} == {plan.waiting}
    assert [s.env[holder_cpus.ENV] for s in slots] == ["12-15", "12-15", "8-11", "8-11"]
    plain = make_slots(gpus=[0], per_gpu=2, cpu_workers=1)
    assert all(s.cpus is None and holder_cpus.ENV not in s.env for s in plain)


CHILD = """
import threading, time, sys
threads = [threading.Thread(target=time.sleep, args=(60,), daemon=True) for _ in range(3)]
[t.start() for t in threads]
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_the_holder_moves_every_thread_below_it_and_gives_the_cpus_back() -> None:
    mine = frozenset(os.sched_getaffinity(0))
    target = frozenset({max(mine)})
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        tids = holder_cpus.threads(child.pid)
        assert len(tids) >= 4
        holding = holder_cpus.hold({holder_cpus.ENV: holder_cpus.format_list(target)})
        try:
            assert holding is not None
            assert holding.moved >= len(tids) + 1 and holding.failed == 0
            assert allowed(os.getpid()) == target
            assert {allowed(t) for t in tids} == {target}
            # A thread started now takes its creator's CPUs.
            later = subprocess.Popen([sys.executable, "-c", "import os; "
                                      "print(sorted(os.sched_getaffinity(0)))"],
                                     stdout=subprocess.PIPE, text=True)
            assert later.communicate(timeout=60)[0].strip() == str(sorted(target))
            assert holding.record() == {"cpus": holder_cpus.format_list(target),
                                        "threads_moved": holding.moved, "threads_refused": 0}
        finally:
            if holding is not None:
                holding.let_go()
        assert allowed(os.getpid()) == mine
        assert {allowed(t) for t in tids} == {mine}
    finally:
        child.kill()
        child.wait()
        os.sched_setaffinity(0, mine)


def test_no_list_or_a_bad_one_moves_nothing() -> None:
    before = frozenset(os.sched_getaffinity(0))
    assert holder_cpus.hold({}) is None
    assert holder_cpus.hold({holder_cpus.ENV: "x-y"}) is None
    assert frozenset(os.sched_getaffinity(0)) == before


def test_a_process_gone_meanwhile_moves_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert holder_cpus.move([proc.pid], frozenset(os.sched_getaffinity(0))) == (0, 0)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_a_slots_evaluation_process_starts_on_its_cpus() -> None:
    from aka_core.service.scheduler import Slot, _preexec

    one = frozenset({min(os.sched_getaffinity(0))})
    slot = Slot("gpu:0#0", {}, "cuda", one)
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         preexec_fn=_preexec(slot), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(sorted(one))


def test_serve_refuses_a_negative_holder_cpus(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from aka_core.cli import main

    code = main(["serve", "--tasks", str(tmp_path), "--state", str(tmp_path / "s"),
                 "--device", "cpu", "--holder-cpus", "-1"])
    assert code != 0
    assert "--holder-cpus must be 0 (none kept) or more" in capsys.readouterr().err
