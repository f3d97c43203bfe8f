"""The docker executor's options: their JSON Schema (``executor.options`` in a run config) and the
typed record built from them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import attrs
from cattrs.gen import override

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


def _mounts_hook(field: str, *, force_read_only: bool = False) -> Any:
    """The converter's hook for a list of mounts: each entry parsed; one that does not parse is
    named by its field and index (``mounts[1]: mount '/a:/b:/c': expected ...``)."""

    def structure_mounts(value: Any, _: Any) -> tuple[Mount, ...]:
        if isinstance(value, str | Mapping):  # one mount where a list of them belongs
            raise ValueError(f"{field}: expected a list of mounts, got {value!r}")
        parsed = []
        for index, spec in enumerate(value):
            try:
                parsed.append(parse_mount(spec, force_read_only=force_read_only))
            except ValueError as exc:
                raise ValueError(f"{field}[{index}]: {exc}") from None
            except (KeyError, TypeError, AttributeError):
                raise ValueError(f"{field}[{index}]: mount {spec!r}: expected "
                                 "SOURCE[:TARGET][:ro|rw] or {source, target, read_only}") from None
        return tuple(parsed)

    return override(struct_hook=structure_mounts)


def _structure_gpus(value: Any, _: Any) -> str | tuple[str, ...]:
    """``all``, ``none``, or GPU indices or UUIDs, kept as strings (``[0, "GPU-1"]``)."""
    return value if isinstance(value, str) else tuple(str(gpu) for gpu in value)


# The types of the fields the converter structures through a hook of their own.
Gpus = Annotated[str | tuple[str, ...], override(struct_hook=_structure_gpus)]
Mounts = Annotated[tuple[Mount, ...], _mounts_hook("mounts")]
Credentials = Annotated[tuple[Mount, ...], _mounts_hook("credentials", force_read_only=True)]


@attrs.frozen(kw_only=True)
class DockerOptions:
    """The typed options (``ExecutorSpec.options_class``): the run config's ``executor.options``,
    checked against ``CONFIG_SCHEMA`` (which says what each one means) and structured through the
    one converter, mounts and credentials parsed into ``Mount`` (credentials always read-only)."""

    image: str
    gpus: Gpus = "all"
    vendor: str = "auto"
    memory: str | None = "32g"
    shm_size: str = "2g"
    cpus: float | None = None
    pids_limit: int = 4096
    agent_network: str = "bridge"
    mounts: Mounts = ()
    credentials: Credentials = ()
    pass_env: tuple[str, ...] = ()
    user: str | None = None
    python: str = "python3"
    timeout_seconds: float | None = None
    keep_containers: bool = False
    separate_evaluation: str = "auto"
