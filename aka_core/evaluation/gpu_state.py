"""The GPU's clocks, temperature and power, read at the start, the end of the pairs and the end of
a timing phase.

A reader of a measurement wants to know whether the GPU ran at its usual clocks (a throttled or
power-capped GPU times everything slow, both sides alike, and a clock that changed in the middle
is worth knowing). ``nvidia-smi`` is asked for the judge's own GPU by UUID; where it is missing or
fails, the record says so and the evaluation goes on: a description, not a check. Only the
reward service reads it, to withhold a blame unless the clocks held (``steady``).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from typing import Any

FIELDS = (("clocks.sm", "sm_mhz"), ("clocks.mem", "memory_mhz"),
          ("temperature.gpu", "temperature_c"), ("power.draw", "power_w"))
REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")  # new name, old name
TIMEOUT_SECONDS = 5.0
# Clock-event reasons that slow the GPU: software power cap, hardware slowdown, software and
# hardware thermal slowdown, hardware power brake (NVML's bits; idle and the like are not).
SLOWDOWNS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80

Runner = Callable[..., subprocess.CompletedProcess[str]]


def device_id() -> str | None:
    """The nvidia-smi id (``GPU-<uuid>``) of the GPU this process uses, or None."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    except Exception:  # no CUDA, an old PyTorch: nvidia-smi's first GPU is not necessarily ours
        return None
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"


def _query(fields: str, gpu: str, run: Runner) -> str | None:
    try:
        done = run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                    "-i", gpu], capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                   check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise LookupError(f"nvidia-smi: {type(exc).__name__}: {exc}") from None
    if done.returncode != 0:
        return None
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else None


def read(gpu: str | None = None, run: Runner = subprocess.run) -> dict[str, Any]:
    """Clocks (MHz), temperature (C), power (W) and the active clock-event reasons (a bit mask as
    nvidia-smi prints it); ``{"error": ...}`` when they cannot be read. One nvidia-smi run asks
    for everything (each run costs 0.1-0.3 s); a driver that does not know the reasons' name
    fails the whole query, so each older name is then tried, and last the values alone."""
    gpu = gpu or device_id()
    if gpu is None:
        return {"error": "the GPU's UUID is unknown"}
    names = [name for name, _ in FIELDS]
    try:
        for reasons in (*REASONS, None):
            line = _query(",".join([*names, *([reasons] if reasons else [])]), gpu, run)
            if line is not None:
                break
        else:
            return {"error": f"nvidia-smi could not query {gpu}"}
    except LookupError as exc:
        return {"error": str(exc)}
    values = [value.strip() for value in line.split(",")]
    state: dict[str, Any] = {}
    for (_, key), value in zip(FIELDS, values, strict=False):
        try:
            state[key] = float(value)
        except ValueError:
            state[key] = None  # "[N/A]", "[Not Supported]"
    if reasons is not None and len(values) > len(FIELDS):
        state["clock_event_reasons"] = values[len(FIELDS)]
    return state


class Reading:
    """``read()`` in a thread: nvidia-smi takes 0.1-0.3 s, which the evaluation does not wait
    for (the judge goes on timing; nvidia-smi reads NVML counters and runs nothing on the GPU)."""

    def __init__(self) -> None:
        self.gpu = device_id()  # CUDA calls stay in the judge's main thread
        self._state: dict[str, Any] = {"error": "not read"}
        self._thread = threading.Thread(target=self._read, name="aka-gpu-state", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        self._state = read(self.gpu) if self.gpu else {"error": "the GPU's UUID is unknown"}

    def result(self, timeout: float = 2 * TIMEOUT_SECONDS) -> dict[str, Any]:
        self._thread.join(timeout)
        return self._state if not self._thread.is_alive() else {"error": "nvidia-smi is late"}


WHEN = ("start", "pairs_end", "end")  # a timing phase's readings (``timing.measure``)


def steady(states: Any) -> bool:
    """Whether a timing's readings (``WHEN``) were all taken and show one SM clock (within 1%)
    and no slowdown: then a difference between its phases is not the GPU's state. Anything
    unread or unknown is not steady."""
    try:
        readings = [states[when] for when in WHEN]
        if any("error" in reading for reading in readings):
            return False
        clocks = [float(reading["sm_mhz"]) for reading in readings]
        if max(clocks) - min(clocks) > 0.01 * max(clocks):
            return False
        return not any(int(str(reading["clock_event_reasons"]), 16) & SLOWDOWNS
                       for reading in readings)
    except (KeyError, TypeError, ValueError):
        return False
