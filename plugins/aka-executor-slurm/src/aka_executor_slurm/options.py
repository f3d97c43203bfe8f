"""The ``executor.options`` of the ``slurm`` executor: JSON Schema and the typed model.

The schema is the reference: ``aka validate CONFIG`` checks a config against it and reports file,
line and field; the model's defaults match the schema's.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated, Any

import attrs
from cattrs.gen import override

_STRING = {"type": "string", "minLength": 1}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "partition": {**_STRING, "description": "sbatch --partition (default: the cluster's)."},
        "account": {**_STRING, "description": "sbatch --account."},
        "qos": {**_STRING, "description": "sbatch --qos."},
        "time": {
            "type": "string", "pattern": r"^(\d+-)?\d+:[0-5]\d:[0-5]\d$",
            "description": "Time limit of each job, HH:MM:SS or D-HH:MM:SS (sbatch --time). A "
                           "job that reaches it is killed and its task left without a result.",
        },
        "gpus_per_task": {
            "oneOf": [{"type": "integer", "minimum": 0},
                      {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+:\d+$"}],
            "description": "GPUs per task: a count (1) or TYPE:COUNT (h200:1); requested as "
                           "--gres=gpu:VALUE. A count above 1 gives each task a GPU group.",
        },
        "gres": {
            **_STRING,
            "description": "Other generic resources, added to the --gres list (e.g. nvme:1).",
        },
        "cpus_per_task": {"type": "integer", "minimum": 1,
                          "description": "sbatch --cpus-per-task."},
        "mem": {"type": "string", "pattern": r"^\d+[KMGT]?$",
                "description": "Memory per job (sbatch --mem), e.g. 32G."},
        "array": {
            "type": "boolean", "default": False,
            "description": "Submit one job array for all tasks instead of one job per task.",
        },
        "max_concurrent": {
            "type": "integer", "minimum": 1,
            "description": "At most this many of the run's jobs at a time (arrays: %N; single "
                           "jobs: the rest are submitted as earlier ones end).",
        },
        "job_name": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$", "default": "aka",
                     "description": "Prefix of the job names."},
        "container_image": {
            **_STRING,
            "description": "Run `aka run-task` in this container through pyxis/enroot "
                           "(srun --container-image); the image must have aka installed.",
        },
        "container_mounts": {
            "type": "array", "items": _STRING, "default": [],
            "description": "Extra SRC:DST[:FLAGS] mounts; the run directory and the tasks folder "
                           "are always mounted at their own paths.",
        },
        "container_options": {
            "type": "array", "items": _STRING, "default": [],
            "description": "Extra srun options for the container, e.g. --container-remap-root.",
        },
        "extra_sbatch_args": {
            "type": "array", "items": {"type": "string", "pattern": r"^--?[A-Za-z]"},
            "default": [],
            "description": "More sbatch options, one per item, e.g. --constraint=h200.",
        },
        "python": {
            **_STRING,
            "description": "The Python (with aka installed) on the compute nodes. Default: the "
                           "interpreter running `aka run`; `python3` inside a container.",
        },
        "setup_commands": {
            "type": "array", "items": _STRING, "default": [],
            "description": "Shell lines run before the task, e.g. `module load cuda`.",
        },
        "environment": {
            "type": "object",
            "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
            "additionalProperties": {"type": "string"},
            "default": {},
            "description": "Variables exported in each job, on top of the environment sbatch "
                           "passes from the submitting shell.",
        },
        "poll_seconds": {"type": "number", "exclusiveMinimum": 0, "default": 10,
                         "description": "How often job states are checked."},
        "cancel_on_interrupt": {
            "type": "boolean", "default": True,
            "description": "On Ctrl-C, cancel the run's jobs (true) or leave them running.",
        },
    },
}


def _tuple(value: Any) -> tuple[str, ...]:
    return tuple(value)


def _mapping(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


def _structure_gpus_per_task(value: Any, _: Any) -> int | str | None:
    """A count (``1``) stays a number, ``TYPE:COUNT`` (``h200:1``) a string, as the schema has
    them; the converter has no rule of its own for this union."""
    return value


GpusPerTask = Annotated[int | str | None, override(struct_hook=_structure_gpus_per_task)]


@attrs.frozen(kw_only=True)
class SlurmOptions:
    """The typed options (``ExecutorSpec.options_class``): the run config's ``executor.options``,
    checked against ``CONFIG_SCHEMA`` and structured through the one converter. Built directly
    (tests, callers), lists become tuples and the environment a dict of its own."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    gpus_per_task: GpusPerTask = None
    gres: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    array: bool = False
    max_concurrent: int | None = None
    job_name: str = "aka"
    container_image: str | None = None
    container_mounts: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    container_options: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    extra_sbatch_args: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    python: str | None = None
    setup_commands: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    environment: dict[str, str] = attrs.field(factory=dict, converter=_mapping)
    poll_seconds: float = 10.0
    cancel_on_interrupt: bool = True

    @property
    def interpreter(self) -> str:
        if self.python:
            return self.python
        return "python3" if self.container_image else sys.executable

    def gres_list(self) -> str | None:
        parts = []
        if self.gpus_per_task not in (None, 0):
            parts.append(f"gpu:{self.gpus_per_task}")
        if self.gres:
            parts.append(self.gres)
        return ",".join(parts) or None
