"""A run's ``resources``: the worker slots they make (one per GPU or GPU group, times
``workers_per_gpu``), the visibility variables that confine a slot to its devices, and the checks
of ``resources`` that the schema cannot express. Read by the config loader and by the run before
any worker exists; ``parallel`` runs the workers."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from aka_core.convert import unstructure
from aka_core.errors import ConfigError, Problem
from aka_core.models import ResourcesConfig, RunConfig
from aka_core.yamlio import line_of, load_yaml

VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


@attrs.frozen(kw_only=True)
class Slot:
    """One worker's place: its id and the GPU ids it sees (empty: whatever aka sees)."""

    worker: int
    devices: tuple[int, ...] = ()


def plan_slots(resources: ResourcesConfig) -> list[Slot]:
    """Workers in round-robin order over the GPUs or groups, so the first ones use distinct GPUs."""
    groups: list[tuple[int, ...]] = (
        [tuple(g) for g in resources.gpu_groups] if resources.gpu_groups
        else [(g,) for g in resources.gpus] if resources.gpus else [()])
    count = len(groups) * resources.workers_per_gpu
    return [Slot(worker=i, devices=groups[i % len(groups)]) for i in range(count)]


def needs_workers(config: RunConfig) -> bool:
    """Whether a run goes through worker processes: with the local executor, whenever the
    resources name more than one slot or restrict the one slot to some GPUs (a single listed GPU
    must be honoured too, which a serial run in this process could not do)."""
    slots = plan_slots(config.resources)
    return config.executor.name == "local" and (len(slots) > 1 or bool(slots[0].devices))


def resolve_vendor(resources: ResourcesConfig, gpu: Mapping[str, Any] | None) -> str:
    """``nvidia`` or ``amd``; ``none`` on a host without a GPU (every variable is set then)."""
    if resources.vendor != "auto":
        return resources.vendor
    vendor = str((gpu or {}).get("vendor") or "none")
    return vendor if vendor in ("nvidia", "amd") else "none"


def visibility_environment(devices: Sequence[int], vendor: str,
                           environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that restrict a worker to ``devices``.

    Ids count the GPUs aka itself sees, so they are translated through the visibility list aka
    was started with (under Slurm, GPU 0 of the config is the allocation's first GPU, never the
    host's). On AMD, ``ROCR_VISIBLE_DEVICES`` selects the devices and HIP/CUDA_VISIBLE_DEVICES
    count within that selection; on a host without a GPU nothing reads them, but agents and
    tests still see which slot they are in.
    """
    if not devices:
        return {}
    if vendor == "nvidia":
        return {"CUDA_VISIBLE_DEVICES": _select(devices, _split(environ.get("CUDA_VISIBLE_DEVICES")))}
    if vendor == "amd":
        local = ",".join(str(i) for i in range(len(devices)))
        return {"ROCR_VISIBLE_DEVICES": _select(devices, _amd_visible(environ)),
                "HIP_VISIBLE_DEVICES": local, "CUDA_VISIBLE_DEVICES": local}
    return dict.fromkeys(VISIBILITY_VARIABLES, ",".join(str(i) for i in devices))


def _split(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def _amd_visible(environ: Mapping[str, str]) -> list[str] | None:
    """The devices aka sees on AMD: ROCR's selection, then HIP's indices within it."""
    rocr = _split(environ.get("ROCR_VISIBLE_DEVICES"))
    hip = _split(environ.get("HIP_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES")))
    if hip is None or rocr is None:
        return hip if rocr is None else rocr
    try:
        return [rocr[int(h)] for h in hip]
    except (ValueError, IndexError):
        raise ConfigError("cannot combine ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES of this "
                          "process into one device list; set only ROCR_VISIBLE_DEVICES") from None


def _select(devices: Sequence[int], visible: list[str] | None) -> str:
    if visible is None:
        return ",".join(str(i) for i in devices)
    missing = [i for i in devices if i >= len(visible)]
    if missing:
        raise ConfigError(f"resources name GPU id(s) {missing}, but this process sees only "
                          f"{len(visible)} GPU(s) ({','.join(visible)}): ids count those GPUs")
    return ",".join(visible[i] for i in devices)


def resource_problems(resources: ResourcesConfig, file: Path | None, source: Any) -> list[Problem]:
    """What the schema cannot say: gpus and gpu_groups together, an id in two groups."""
    where = ["resources", "gpu_groups"]
    if resources.gpus is not None and resources.gpu_groups is not None:
        return [Problem("gpus and gpu_groups are mutually exclusive", file=file,
                        line=line_of(source, where), field="resources",
                        hint="keep one: gpus: [0, 1] gives each worker one GPU, "
                             "gpu_groups: [[0, 1], [2, 3]] gives each worker a group")]
    seen: dict[int, int] = {}
    problems = []
    for index, group in enumerate(resources.gpu_groups or ()):
        for gpu in group:
            if gpu in seen:
                problems.append(Problem(
                    f"GPU {gpu} is already in group {seen[gpu]}", file=file,
                    line=line_of(source, [*where, index]), field=f"resources.gpu_groups[{index}]",
                    hint="each GPU may belong to one group only"))
            seen.setdefault(gpu, index)
    return problems


def missing_gpu_problems(resources: ResourcesConfig, count: int, file: Path | None) -> list[Problem]:
    """GPU ids that this host does not have (``count`` GPUs visible to aka)."""
    key = "gpu_groups" if resources.gpu_groups else "gpus"
    ids = sorted({g for slot in plan_slots(resources) for g in slot.devices})
    missing = [g for g in ids if g >= count]
    if not missing:
        return []
    source = load_yaml(file) if file is not None and file.is_file() else None
    return [Problem(f"GPU id(s) {missing} do not exist: this host shows aka {count} GPU(s), "
                    f"ids 0-{count - 1}", file=file, line=line_of(source, ["resources", key]),
                    field=f"resources.{key}")]


def parallel_record(config: RunConfig, gpu: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What ``run.yaml`` records under ``parallel`` (``None``: a serial run).

    Raises ``ConfigError`` when a slot's devices cannot be made visible from this process.
    """
    if not needs_workers(config):
        return None
    vendor = resolve_vendor(config.resources, gpu)
    slots = plan_slots(config.resources)
    for slot in slots:
        visibility_environment(slot.devices, vendor, os.environ)
    return {"vendor": vendor, "slots": [unstructure(s) for s in slots]}


def describe(devices: Sequence[int]) -> str:
    """A slot's devices for logs: ``0,1``, or ``all`` for a slot restricted to none."""
    return ",".join(str(d) for d in devices) or "all"
