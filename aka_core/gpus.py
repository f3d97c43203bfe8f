"""Known GPU models, and whether a task can run on a run's target.

A run config names its ``target_gpu_model`` (``H100``, ``MI300X``, ``cpu`` ...) or an architecture
(``sm_90``, ``gfx942``). A task's ``requires`` section says what it needs; ``skip_reason`` says why
a task does not fit a target, so the run records a skip instead of a confusing failure.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from aka_core.errors import ConfigError, Problem

if TYPE_CHECKING:  # models imports this module for the parsed ``target_gpu_model``
    from aka_core.models import Task

Vendor = Literal["nvidia", "amd"]


@attrs.frozen(kw_only=True)
class GpuModel:
    """One target: ``vendor`` and ``architecture`` are None for ``cpu`` (no GPU)."""

    name: str
    vendor: Vendor | None
    architecture: str | None
    compute_capability: float | None = None
    generation: str = ""
    memory_bandwidth: float | None = None
    """Device memory bandwidth in bytes/s, from the datasheet (above what kernels reach)."""
    peak_flops: float | None = None
    """The highest dense arithmetic rate in FLOP/s (the lowest-precision tensor-core rate), from
    the datasheet: no kernel does its FLOPs faster, whatever their precision."""

    @property
    def is_cpu(self) -> bool:
        return self.vendor is None


KNOWN_GPUS: dict[str, GpuModel] = {
    model.name.lower(): model
    for model in (
        GpuModel(name="H100", vendor="nvidia", architecture="sm_90", compute_capability=9.0,
                 generation="Hopper",
                 memory_bandwidth=3.35e12, peak_flops=1.979e15),
        GpuModel(name="H200", vendor="nvidia", architecture="sm_90", compute_capability=9.0,
                 generation="Hopper",
                 memory_bandwidth=4.8e12, peak_flops=1.979e15),
        GpuModel(name="B200", vendor="nvidia", architecture="sm_100", compute_capability=10.0,
                 generation="Blackwell",
                 memory_bandwidth=8.0e12, peak_flops=9.0e15),
        GpuModel(name="A100", vendor="nvidia", architecture="sm_80", compute_capability=8.0,
                 generation="Ampere",
                 memory_bandwidth=2.039e12, peak_flops=6.24e14),
        GpuModel(name="L40S", vendor="nvidia", architecture="sm_89", compute_capability=8.9,
                 generation="Ada Lovelace",
                 memory_bandwidth=8.64e11, peak_flops=7.33e14),
        GpuModel(name="RTX4090", vendor="nvidia", architecture="sm_89", compute_capability=8.9,
                 generation="Ada Lovelace",
                 memory_bandwidth=1.008e12, peak_flops=6.61e14),
        GpuModel(name="MI300X", vendor="amd", architecture="gfx942", generation="CDNA3",
                 memory_bandwidth=5.3e12, peak_flops=2.615e15),
        GpuModel(name="MI325X", vendor="amd", architecture="gfx942", generation="CDNA3",
                 memory_bandwidth=6.0e12, peak_flops=2.615e15),
        GpuModel(name="MI355X", vendor="amd", architecture="gfx950", generation="CDNA4",
                 memory_bandwidth=8.0e12, peak_flops=1.0e16),
        GpuModel(name="gfx1201", vendor="amd", architecture="gfx1201", generation="RDNA4",
                 memory_bandwidth=6.4e11, peak_flops=8.0e14),
        GpuModel(name="cpu", vendor=None, architecture=None, generation="no GPU"),
    )
}

GPU_LOCK_DIR_VARIABLE = "AKA_GPU_LOCK_DIR"
"""Names the folder of the per-GPU lock files (default: ``aka-gpu-locks`` in the system temp
folder). Every process that checks or times on a GPU takes its lock there, so all of them (local
workers, containers, a confined agent's ``aka selfcheck``) must see the same folder."""


def gpu_lock_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of the per-GPU lock files for ``environ`` (default: this process's), created."""
    env = os.environ if environ is None else environ
    folder = Path(env.get(GPU_LOCK_DIR_VARIABLE) or Path(tempfile.gettempdir(), "aka-gpu-locks"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


_SM_ARCH = re.compile(r"^sm_(\d+)([af]?)$", re.IGNORECASE)
_GFX_ARCH = re.compile(r"^gfx[0-9a-f]{3,4}$", re.IGNORECASE)


def gpu_model(name: str) -> GpuModel:
    """The target named ``name`` (case-insensitive): a known model or an architecture.

    An architecture such as ``sm_90`` or ``gfx942`` is accepted even when no model in the table
    has it, so new GPUs need no code change. Anything else raises ``ConfigError``.
    """
    known = KNOWN_GPUS.get(name.strip().lower())
    if known is not None:
        return known
    sm = _SM_ARCH.match(name.strip())
    if sm:
        digits = sm.group(1)
        capability = float(f"{digits[:-1]}.{digits[-1]}") if len(digits) > 1 else float(digits)
        return GpuModel(name=name, vendor="nvidia", architecture=name.strip().lower(),
                        compute_capability=capability)
    if _GFX_ARCH.match(name.strip()):
        return GpuModel(name=name, vendor="amd", architecture=name.strip().lower())
    names = [model.name for model in KNOWN_GPUS.values()]
    close = difflib.get_close_matches(name.lower(), list(KNOWN_GPUS), n=1, cutoff=0.6)
    hint = f"did you mean {KNOWN_GPUS[close[0]].name!r}? " if close else ""
    raise ConfigError(Problem(
        f"unknown GPU model {name!r}",
        field="target_gpu_model",
        hint=f"{hint}known models: {', '.join(names)}; or give an architecture such as "
             "sm_90 or gfx942",
    ))


def target_model(value: GpuModel | str | None) -> GpuModel | None:
    """A run config's ``target_gpu_model`` parsed once, where the config is read or built.

    The model keeps the spelling of the config (``h100`` stays ``h100`` in the run directory's
    name and in ``run.yaml``). None (only in code, never in a config file): no model is named,
    the GPU this host has is the target (``aka eval``). Raises ``ConfigError`` for an unknown name.
    """
    if value is None or isinstance(value, GpuModel):
        return value
    model = gpu_model(value)
    return model if model.name == value else attrs.evolve(model, name=value)


def skip_reason(task: Task, target: GpuModel | None,
                backend_vendors: Sequence[str] = ()) -> str | None:
    """Why ``task`` cannot run on ``target``, or None when it can (always, for None: whatever
    GPU this host has is the target, and the evaluation says what it cannot do there).
    ``backend_vendors``: the GPU vendors the task's backend runs on (its ``BackendSpec.vendors``,
    ``PluginHost.backend_vendors``); empty: a portable backend (triton, python).

    On a ``cpu`` target only tasks whose correctness runs without a GPU (``cpu_interpreter``) and
    whose backend is not vendor-specific run; the GPU requirements are not checked there.
    ``min_compute_capability`` is an NVIDIA notion: it constrains NVIDIA targets only.
    """
    if target is None:
        return None
    gpu = target
    needs = task.requires
    needed = " or ".join(_vendor_label(v) for v in backend_vendors)
    if gpu.is_cpu:
        if backend_vendors:
            return (f"backend {task.backend!r} needs an {needed} GPU; "
                    "the target is cpu (to build it compile-only on this host, set "
                    "target_gpu_model to the GPU and evaluation.device: cpu)")
        if not needs.cpu_interpreter:
            return "the task needs a GPU (requires.cpu_interpreter is false); the target is cpu"
        return None
    if backend_vendors and gpu.vendor not in backend_vendors:
        return (f"backend {task.backend!r} needs an {needed} GPU; "
                f"the target {gpu.name} is {_vendor_label(gpu.vendor)}")
    if needs.vendors and gpu.vendor not in needs.vendors:
        return (f"the task requires vendor {' or '.join(needs.vendors)}; the target {gpu.name} "
                f"is {_vendor_label(gpu.vendor)}")
    if needs.architectures and (gpu.architecture or "").lower() not in {
        arch.lower() for arch in needs.architectures
    }:
        return (f"the task requires architecture {', '.join(needs.architectures)}; the target "
                f"{gpu.name} is {gpu.architecture}")
    if (needs.min_compute_capability is not None and gpu.vendor == "nvidia"
            and gpu.compute_capability is not None
            and gpu.compute_capability < needs.min_compute_capability):
        return (f"the task requires compute capability >= {needs.min_compute_capability}; the "
                f"target {gpu.name} has {gpu.compute_capability}")
    return None


def validation_on(task: Task, target: GpuModel) -> dict[str, Any] | None:
    """The task's ``validated_on`` entry that ran it on ``target`` (mode ``run`` on a device
    whose name contains the target's, e.g. "NVIDIA H200" for H200), or None."""
    if target.is_cpu:
        return None
    name = target.name.lower()
    return next((dict(entry) for entry in task.validated_on
                 if entry.get("mode") == "run" and name in str(entry.get("device", "")).lower()),
                None)


def _vendor_label(vendor: str | None) -> str:
    return {"nvidia": "NVIDIA", "amd": "AMD"}.get(vendor or "", "no GPU")


def gpu_mismatch(found: Mapping[str, Any], target: GpuModel) -> str | None:
    """Why the GPU ``found`` (a ``devices.probe`` record) is not ``target``, or None."""
    arch = found.get("architecture")
    name = str(found.get("name") or "")
    if target.architecture and arch != target.architecture:
        return (f"the GPU is {name} ({arch}) but the target {target.name} is "
                f"{target.architecture}: timings would not be for the target")
    named_by_arch = target.name.lower().startswith(("sm_", "gfx"))
    if not named_by_arch and target.name.lower() not in name.lower():
        return (f"the GPU is {name}, same architecture {arch} as the target {target.name} but "
                "another product (other memory, other clocks): timings would not be for the "
                "target")
    return None


def model_of_device(device_name: str) -> GpuModel | None:
    """The known model a device reports itself as (``NVIDIA H200``, ``AMD Instinct MI300X``)."""
    words = re.findall(r"[a-z0-9]+", device_name.lower())
    for model in KNOWN_GPUS.values():
        if not model.is_cpu and model.name.lower() in words:
            return model
    return None
