"""The GPU's clocks, temperature and power as the judge records them around a timing phase."""

from __future__ import annotations

import subprocess
from typing import Any

from aka_core.evaluation import gpu_state


def fake_smi(answers: dict[str, tuple[int, str]]) -> Any:
    calls: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        fields = cmd[1].removeprefix("--query-gpu=")
        code, out = answers.get(fields, (6, ""))
        return subprocess.CompletedProcess(cmd, code, out, "")

    run.calls = calls  # type: ignore[attr-defined]
    return run


def test_reads_clocks_temperature_power_and_reasons_of_its_own_gpu_in_one_run() -> None:
    run = fake_smi({"clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_event_reasons.active":
                    (0, "1980, 3201, 39, 147.95, 0x0000000000000000\n")})
    state = gpu_state.read("GPU-abc", run=run)
    assert state == {"sm_mhz": 1980.0, "memory_mhz": 3201.0, "temperature_c": 39.0,
                     "power_w": 147.95, "clock_event_reasons": "0x0000000000000000"}
    assert len(run.calls) == 1 and run.calls[0][-2:] == ["-i", "GPU-abc"]


def test_an_older_driver_answers_to_the_old_reasons_name_and_unsupported_fields_are_none() -> None:
    run = fake_smi({"clocks.sm,clocks.mem,temperature.gpu,power.draw,"
                    "clocks_throttle_reasons.active": (0, "1755, 2619, 51, [N/A], 0x4")})
    state = gpu_state.read("GPU-abc", run=run)
    assert state["power_w"] is None and state["clock_event_reasons"] == "0x4"
    assert len(run.calls) == 2  # the new name first


def test_a_driver_without_either_reasons_name_still_gives_the_values() -> None:
    run = fake_smi({"clocks.sm,clocks.mem,temperature.gpu,power.draw": (0, "1755, 2619, 51, 90")})
    state = gpu_state.read("GPU-abc", run=run)
    assert state == {"sm_mhz": 1755.0, "memory_mhz": 2619.0, "temperature_c": 51.0,
                     "power_w": 90.0}
    assert not gpu_state.steady({when: state for when in gpu_state.WHEN})  # reasons unknown


def test_a_missing_or_failing_nvidia_smi_is_recorded_not_raised() -> None:
    def missing(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError("nvidia-smi")

    assert "nvidia-smi" in gpu_state.read("GPU-abc", run=missing)["error"]
    assert "could not query" in gpu_state.read("GPU-abc", run=fake_smi({}))["error"]

    def hangs(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(cmd, 5)

    assert "TimeoutExpired" in gpu_state.read("GPU-abc", run=hangs)["error"]


def test_without_a_gpu_there_is_no_id() -> None:
    import pytest

    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    assert gpu_state.device_id() is None
    assert gpu_state.read() == {"error": "the GPU's UUID is unknown"}


def test_a_reading_in_the_background_gives_its_result(monkeypatch: Any) -> None:
    monkeypatch.setattr(gpu_state, "device_id", lambda: "GPU-abc")
    monkeypatch.setattr(gpu_state, "read", lambda gpu: {"sm_mhz": 1980.0, "gpu": gpu})
    assert gpu_state.Reading().result() == {"sm_mhz": 1980.0, "gpu": "GPU-abc"}
    monkeypatch.setattr(gpu_state, "device_id", lambda: None)
    assert "unknown" in gpu_state.Reading().result()["error"]


def test_steady_means_every_reading_taken_one_clock_and_no_slowdown() -> None:
    ok = {"sm_mhz": 1980.0, "clock_event_reasons": "0x0000000000000000"}
    idle = {"sm_mhz": 1980.0, "clock_event_reasons": "0x0000000000000001"}  # not a slowdown

    def states(pairs_end: dict, end: dict | None = None) -> dict:
        return {"start": ok, "pairs_end": pairs_end, "end": end or ok}

    assert gpu_state.steady(states(ok))
    assert gpu_state.steady(states(ok, idle))
    assert gpu_state.steady(states({**ok, "sm_mhz": 1970.0}))  # within 1%
    for bad in ({**ok, "sm_mhz": 1755.0}, {**ok, "clock_event_reasons": "0x0000000000000020"},
                {**ok, "clock_event_reasons": "0x0000000000000008"}, {"error": "late"},
                {"sm_mhz": 1980.0}, {**ok, "sm_mhz": None}):
        assert not gpu_state.steady(states(bad)), bad
        assert not gpu_state.steady(states(ok, bad)), bad
    assert not gpu_state.steady(None) and not gpu_state.steady({"start": ok, "end": ok})
