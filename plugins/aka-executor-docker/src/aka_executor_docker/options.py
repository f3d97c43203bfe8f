"""The docker executor's options: their JSON Schema (``executor.options`` in a run config) and the
typed record built from them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

_SIZE = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?[bkmgBKMG]?$"}
_MOUNT = {
    "oneOf": [
        {"type": "string", "minLength": 1,
         "description": "SOURCE[:TARGET][:ro|rw]; TARGET defaults to SOURCE, mode to ro."},
        {"type": "object", "additionalProperties": False, "required": ["source"],
         "properties": {"source": {"type": "string", "minLength": 1},
                        "target": {"type": "string", "minLength": 1},
                        "read_only": {"type": "boolean", "default": True}}},
    ]
}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["image"],
    "properties": {
        "image": {"type": "string", "minLength": 1,
                  "description": "The image tasks run in; it must hold Python and the same aka "
                                 "(images/README.md)."},
        "gpus": {"oneOf": [{"enum": ["all", "none"]},
                           {"type": "array", "minItems": 1, "uniqueItems": True,
                            "items": {"type": ["integer", "string"]}}],
                 "default": "all",
                 "description": "GPUs passed to the container: all, none, or a list of indices "
                                "(or NVIDIA UUIDs). Only runs that evaluate on a GPU get any."},
        "vendor": {"enum": ["auto", "nvidia", "amd"], "default": "auto",
                   "description": "How to pass GPUs through: NVIDIA device requests or AMD's "
                                  "/dev/kfd and /dev/dri; auto follows target_gpu_model."},
        "memory": {"oneOf": [_SIZE, {"type": "null"}], "default": "32g",
                   "description": "Memory limit of a task's container (no swap beyond it); "
                                  "null: no limit."},
        "shm_size": {**_SIZE, "default": "2g", "description": "Size of /dev/shm."},
        "cpus": {"type": ["number", "null"], "exclusiveMinimum": 0, "default": None,
                 "description": "CPU limit (cores); null: no limit."},
        "pids_limit": {"type": "integer", "minimum": 32, "default": 4096,
                       "description": "Most processes and threads a task's container may have."},
        "agent_network": {"type": "string", "minLength": 1, "default": "bridge",
                          "description": "Network of a task whose agent needs one (a CLI agent): "
                                         "bridge, host or a docker network's name. Tasks whose "
                                         "agent runs in-process get none."},
        "mounts": {"type": "array", "items": _MOUNT, "default": [],
                   "description": "More bind mounts, read-only unless :rw (e.g. a replay "
                                  "source folder)."},
        "credentials": {"type": "array", "default": [],
                        "items": {"type": "string", "minLength": 1,
                                  "description": "SOURCE[:TARGET]"},
                        "description": "Credential files or folders, always mounted read-only "
                                       "(e.g. ~/.codex/auth.json)."},
        "pass_env": {"type": "array", "default": [],
                     "items": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
                     "description": "Host environment variables passed into the container by "
                                    "name (e.g. ANTHROPIC_API_KEY)."},
        "user": {"type": ["string", "null"], "default": None,
                 "description": "UID[:GID] the container runs as; null: this process's own, so "
                                "files in the run directory stay yours."},
        "python": {"type": "string", "minLength": 1, "default": "python3",
                   "description": "The image's Python that has aka installed."},
        "timeout_seconds": {"type": ["number", "null"], "exclusiveMinimum": 0, "default": None,
                            "description": "Wall-clock limit of one task's container; null: the "
                                           "agent's timeout_seconds plus 1800 s for setup and "
                                           "evaluation."},
        "separate_evaluation": {"enum": ["auto", "always"], "default": "auto",
                                "description": "Evaluate in a second container (no network, no "
                                               "credentials) after the agent's: auto does it when "
                                               "the agent needs a network (a CLI agent)."},
        "keep_containers": {"type": "boolean", "default": False,
                            "description": "Leave finished containers for inspection."},
    },
}


@attrs.frozen(kw_only=True)
class Mount:
    source: Path
    target: str
    read_only: bool = True


def parse_mount(spec: str | Mapping[str, Any], *, force_read_only: bool = False) -> Mount:
    """``SOURCE[:TARGET][:ro|rw]`` or ``{source, target, read_only}``; the source made absolute."""
    if isinstance(spec, Mapping):
        source, target = str(spec["source"]), spec.get("target")
        read_only = bool(spec.get("read_only", True))
    else:
        parts = spec.split(":")
        read_only = True
        if len(parts) > 1 and parts[-1] in ("ro", "rw"):
            read_only = parts.pop() == "ro"
        if len(parts) > 2:
            raise ValueError(f"mount {spec!r}: expected SOURCE[:TARGET][:ro|rw]")
        source, target = parts[0], parts[1] if len(parts) == 2 else None
    path = Path(source).expanduser().absolute()
    return Mount(source=path, target=str(target or path),
                 read_only=read_only or force_read_only)


@attrs.frozen(kw_only=True)
class DockerOptions:
    """Validated options with their defaults (see ``CONFIG_SCHEMA`` for each one's meaning)."""

    image: str
    gpus: str | tuple[str, ...] = "all"
    vendor: str = "auto"
    memory: str | None = "32g"
    shm_size: str = "2g"
    cpus: float | None = None
    pids_limit: int = 4096
    agent_network: str = "bridge"
    mounts: tuple[Mount, ...] = ()
    credentials: tuple[Mount, ...] = ()
    pass_env: tuple[str, ...] = ()
    user: str | None = None
    python: str = "python3"
    timeout_seconds: float | None = None
    keep_containers: bool = False
    separate_evaluation: str = "auto"

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DockerOptions:
        data = dict(options)
        gpus = data.pop("gpus", "all")
        return cls(
            gpus=gpus if isinstance(gpus, str) else tuple(str(g) for g in gpus),
            mounts=tuple(parse_mount(m) for m in data.pop("mounts", ())),
            credentials=tuple(parse_mount(c, force_read_only=True)
                              for c in data.pop("credentials", ())),
            pass_env=tuple(data.pop("pass_env", ())),
            **data,
        )
