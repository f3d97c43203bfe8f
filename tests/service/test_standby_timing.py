"""When a slot starts its next evaluation ahead: at once while requests wait (the pipeline), else
once the current evaluation is over (nothing competing with its checks and timing)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from aka_core.service import scheduler as scheduler_module
from aka_core.service.scheduler import Scheduler, Slot
from aka_core.service.store import RequestStore

JOB_SECONDS = 0.6


def standby_delay(tmp_path: Path, waiting: int, monkeypatch: pytest.MonkeyPatch) -> float:
    """Seconds from the evaluation's start to its slot's next standby, with ``waiting`` other
    requests queued behind it."""
    store = RequestStore(tmp_path / "queue.db")
    for k in range(1 + waiting):
        store.submit(f"r{k}", f"d{k}", "triton2triton/gelu", deadline=None,
                     options={"task_dir": str(tmp_path), "held_out_seed": None})
    spool = tmp_path / "spool"
    slot = Slot("cpu#0", device="cpu")
    scheduler = Scheduler(store, [slot], spool, evaluator="x:y", prestart=(str(tmp_path),))
    (scheduler.folder("r0") / "candidate").mkdir(parents=True)
    marks: dict[str, float] = {}
    real_exec = asyncio.create_subprocess_exec

    async def job(*args: object, **kwargs: object) -> asyncio.subprocess.Process:
        marks["job"] = time.monotonic()
        return await real_exec(sys.executable, "-c", f"import time; time.sleep({JOB_SECONDS})")

    async def spawn(slot: Slot) -> None:
        marks.setdefault("standby", time.monotonic())

    async def nothing_waiting(slot: Slot, spec: Path) -> None:
        return None

    monkeypatch.setattr(scheduler_module.asyncio, "create_subprocess_exec", job)
    monkeypatch.setattr(scheduler, "_spawn_standby", spawn)
    monkeypatch.setattr(scheduler, "_take_standby", nothing_waiting)
    request = store.claim(slot.name)
    assert request is not None
    asyncio.run(scheduler._evaluate(slot, request))
    store.close()
    return marks["standby"] - marks["job"]


def test_the_next_evaluation_starts_at_once_under_load(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert standby_delay(tmp_path, 3, monkeypatch) < JOB_SECONDS / 2


def test_an_idle_slot_starts_its_next_evaluation_after_this_one(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    assert standby_delay(tmp_path, 0, monkeypatch) >= JOB_SECONDS
