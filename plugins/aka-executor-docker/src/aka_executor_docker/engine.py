"""The docker engine, through the docker SDK: connect, find the image, pass GPUs through, and run
one container to its end with its logs streamed to a file, a wall-clock limit, and removal.

Every failure a user can fix is an ``AkaError`` that says what to do.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from aka_core.plugin import AkaError
from aka_executor_docker.options import Mount

Vendor = Literal["nvidia", "amd"]
AMD_DEVICES = ("/dev/kfd", "/dev/dri")
LABEL_RUN, LABEL_TASK = "org.aka.run", "org.aka.task"
API_TIMEOUT = 120


class DockerError(AkaError):
    """The docker engine, the image or the GPU pass-through is not as a run needs."""


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def connect() -> Any:
    """A client of a running engine (``DOCKER_HOST`` or the default socket), or a ``DockerError``."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=API_TIMEOUT)
        client.ping()
    except DockerException as exc:
        text = str(exc)
        if "FileNotFoundError" in text or "No such file" in text:
            why = "nothing listens there (no socket)"
        elif "Connection refused" in text or "ConnectionRefused" in text:
            why = "the connection was refused"
        elif "PermissionError" in text or "Permission denied" in text:
            why = ("permission denied: run as a member of the docker group, or use rootless "
                   "docker")
        else:
            why = text
        raise DockerError(
            f"cannot reach the docker engine at {engine_address()}: {why}. Start it (systemctl "
            "start docker; on a CI machine scripts/ci/docker-setup.sh) or point DOCKER_HOST at a "
            "running engine") from None
    return client


def require_image(client: Any, image: str) -> Any:
    """The image, present on the engine; never pulled implicitly."""
    from docker.errors import ImageNotFound

    try:
        return client.images.get(image)
    except ImageNotFound:
        tags = sorted(t for i in client.images.list() for t in i.tags if "aka" in t)[:8]
        have = f" (aka images here: {', '.join(tags)})" if tags else ""
        raise DockerError(
            f"docker image {image!r} is not on this engine{have}: build it (images/build.sh "
            f"ci|cuda|rocm, see images/README.md) or `docker pull {image}`, then run again "
            "(or resume with aka run --resume RUN_DIR)") from None


def network_problem(client: Any, network: str) -> str | None:
    """Why ``network`` will not give a container a network, or None when it will."""
    if network in ("none", "host") or network.startswith("container:"):
        return None
    names = {n.name for n in client.networks.list()}
    if network in names:
        return None
    if network == "bridge":
        return ("the engine has no bridge network (dockerd --bridge=none): containers on "
                "'bridge' get no network; set executor.options.agent_network to host or to an "
                "existing network")
    raise DockerError(f"docker network {network!r} does not exist (networks here: "
                      f"{', '.join(sorted(names))}): set executor.options.agent_network to one of "
                      "them, or create it with docker network create")


# --------------------------------------------------------------------------- GPUs


@attrs.frozen(kw_only=True)
class GpuPassthrough:
    vendor: Vendor
    ids: tuple[str, ...] | None = None
    """Indices (or NVIDIA UUIDs) of the GPUs to pass; None: all of them."""


def gpu_settings(gpu: GpuPassthrough | None) -> dict[str, Any]:
    """Keyword arguments of ``containers.create`` that pass ``gpu`` through (with environment)."""
    if gpu is None:
        return {}
    if gpu.vendor == "nvidia":
        from docker.types import DeviceRequest

        request = (DeviceRequest(count=-1, capabilities=[["gpu"]]) if gpu.ids is None else
                   DeviceRequest(device_ids=list(gpu.ids), capabilities=[["gpu"]]))
        return {"device_requests": [request],
                "environment": {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}}
    missing = [p for p in AMD_DEVICES if not os.path.exists(p)]
    if missing:
        raise DockerError(
            f"GPU vendor amd, but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
            "missing on this host: load the amdgpu driver (ROCm), or set executor.options.gpus: "
            "none for a run that evaluates on the CPU")
    groups = sorted({os.stat(p).st_gid for p in _amd_device_files()})
    env = {"ROCR_VISIBLE_DEVICES": ",".join(gpu.ids)} if gpu.ids is not None else {}
    return {"devices": [f"{p}:{p}:rwm" for p in AMD_DEVICES],
            # the device files' own groups (video, render), so a non-root user may open them
            "group_add": [str(g) for g in groups],
            # ROCm's documented setting for containers (its runtime uses syscalls docker's
            # default profile filters)
            "security_opt": ["seccomp=unconfined"],
            "environment": env}


def _amd_device_files() -> list[str]:
    files = ["/dev/kfd"]
    dri = Path("/dev/dri")
    if dri.is_dir():
        files += [str(p) for p in sorted(dri.iterdir()) if p.name.startswith(("render", "card"))]
    return files


def gpu_error(exc: Exception, gpu: GpuPassthrough | None) -> DockerError | None:
    """A clear error for a container the engine could not give the GPU to, else None."""
    text = str(getattr(exc, "explanation", None) or exc)
    if gpu is not None and gpu.vendor == "nvidia" and (
            "could not select device driver" in text or "nvidia-container" in text
            or "unknown or invalid runtime" in text):
        return DockerError(
            f"docker cannot give the container an NVIDIA GPU ({text.strip()}): install the "
            "NVIDIA Container Toolkit and configure docker for it (nvidia-ctk runtime configure "
            "--runtime=docker; restart dockerd), or set executor.options.gpus: none for a run "
            "that evaluates on the CPU")
    if gpu is not None and gpu.vendor == "amd" and ("/dev/kfd" in text or "/dev/dri" in text):
        return DockerError(f"docker cannot give the container the AMD GPU devices ({text.strip()})"
                           ": check that /dev/kfd and /dev/dri exist and that dockerd may use them")
    return None


# --------------------------------------------------------------------------- containers


@attrs.frozen(kw_only=True)
class ContainerSpec:
    """Everything one container of a task (or of a check) is made from."""

    image: str
    command: tuple[str, ...]
    name: str
    network: str = "none"
    mounts: tuple[Mount, ...] = ()
    environment: Mapping[str, str] = attrs.Factory(dict)
    user: str | None = None
    working_dir: str | None = None
    gpu: GpuPassthrough | None = None
    memory: str | None = None
    shm_size: str | None = None
    cpus: float | None = None
    pids_limit: int | None = None
    labels: Mapping[str, str] = attrs.Factory(dict)


def create_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """The ``containers.create`` arguments for ``spec``."""
    from docker.types import Mount as DockerMount

    gpu = gpu_settings(spec.gpu)
    environment = {**spec.environment, **gpu.pop("environment", {})}
    kwargs: dict[str, Any] = {
        "image": spec.image,
        "command": list(spec.command),
        "name": spec.name,
        "labels": dict(spec.labels),
        "environment": environment,
        "network_mode": spec.network,
        "mounts": [DockerMount(target=m.target, source=str(m.source), type="bind",
                               read_only=m.read_only) for m in spec.mounts],
        "working_dir": spec.working_dir,
        "user": spec.user,
        "init": True,  # a real PID 1 reaps what the agent and the workers leave behind
        "security_opt": ["no-new-privileges", *gpu.pop("security_opt", [])],
        "pids_limit": spec.pids_limit,
        "shm_size": spec.shm_size,
        **gpu,
    }
    if spec.memory:
        kwargs["mem_limit"] = spec.memory
        kwargs["memswap_limit"] = spec.memory  # no swap beyond the limit
    if spec.cpus:
        kwargs["nano_cpus"] = int(spec.cpus * 1e9)
    return {k: v for k, v in kwargs.items() if v is not None}


@attrs.frozen(kw_only=True)
class ContainerOutcome:
    exit_code: int | None
    seconds: float
    timed_out: bool = False
    oom_killed: bool = False
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def run_container(client: Any, spec: ContainerSpec, *, timeout: float, log_path: Path | None,
                  capture_output: bool = False, keep: bool = False) -> ContainerOutcome:
    """Create, start and wait for one container; stream its output to ``log_path`` (and with
    ``capture_output``, return its stdout and stderr apart).

    Past ``timeout`` seconds it is killed. It is removed afterwards (also on an interrupt) unless
    ``keep``. Raises ``DockerError`` when the engine refuses to create or start it.
    """
    import requests
    from docker.errors import APIError, ImageNotFound

    try:
        container = client.containers.create(**create_kwargs(spec))
    except ImageNotFound:
        require_image(client, spec.image)
        raise
    except APIError as exc:
        raise gpu_error(exc, spec.gpu) or DockerError(
            f"docker could not create the container: {exc.explanation or exc}") from None
    pump: threading.Thread | None = None
    started = time.monotonic()
    try:
        try:
            container.start()
        except APIError as exc:
            raise gpu_error(exc, spec.gpu) or DockerError(
                f"docker could not start the container: {exc.explanation or exc}") from None
        if log_path is not None:
            pump = threading.Thread(target=_pump_logs, args=(container, log_path), daemon=True)
            pump.start()
        timed_out = False
        try:
            status = container.wait(timeout=timeout)
            exit_code: int | None = int(status.get("StatusCode", -1))
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            timed_out, exit_code = True, None
            _kill(container)
        seconds = round(time.monotonic() - started, 3)
        if pump is not None:
            pump.join(timeout=30)
        stdout = stderr = ""
        if capture_output:
            stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        container.reload()
        oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
        return ContainerOutcome(exit_code=exit_code, seconds=seconds, timed_out=timed_out,
                                oom_killed=oom, stdout=stdout, stderr=stderr)
    finally:
        if not keep:
            _remove(container)
        if pump is not None:
            pump.join(timeout=10)


def _pump_logs(container: Any, path: Path) -> None:
    """Append the container's stdout and stderr to ``path`` as they come, until it stops."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as out:
        try:
            for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                out.write(chunk)
                out.flush()
        except Exception as exc:  # the container went away: keep what came
            out.write(f"\n[aka: log stream ended: {type(exc).__name__}: {exc}]\n".encode())


def _kill(container: Any) -> None:
    from docker.errors import APIError

    try:
        container.kill()
    except APIError:
        pass  # it stopped meanwhile


def _remove(container: Any) -> None:
    from docker.errors import APIError, NotFound

    try:
        container.remove(force=True)
    except NotFound:
        pass
    except APIError as exc:
        # removal in progress or the engine is busy: say so, never mask the task's own outcome
        import structlog

        structlog.get_logger("aka.docker").warning("could not remove a container",
                                                   container=container.name, error=str(exc))
