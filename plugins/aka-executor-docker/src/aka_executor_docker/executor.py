"""The docker executor: each task's lifecycle in a container of its own, one task after another.

A task's container runs ``python -m aka_core.cli run-task RUN_DIR TASK_ID`` (``aka run-task``)
with the run directory bind-mounted read-write at its own path and the tasks folder read-only at
its own path, so every path in ``run.yaml`` means the same inside and out. Before the first task,
one short container from the same image reports its runtime (``python -m aka_core.commands.smoke --facts``):
a missing image, an image without aka, a GPU the container cannot see or that is not the target
stop the run there, with what to do, instead of failing every task.

Network: the whole lifecycle of a task shares one container. A task whose agent runs in-process
(noop, replay, policy agents) gets no network at all, so its evaluation has none either. A CLI
agent needs the network to reach its model, so its container is on ``agent_network`` and the
evaluation that follows in the same container is too, until ``aka run-task`` can run the agent and
the evaluation apart (see this plugin's README).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import structlog

from aka_core.plugin import (
    AGENT_PHASE_FILE,
    AKA_VERSION,
    DEVICE_ON_NODE,
    Check,
    PluginHost,
    Run,
    RunConfig,
    gpus,
    now_iso,
    read_facts,
    runtime_checks,
    task_dir,
    task_result_path,
)
from aka_executor_docker.engine import (
    LABEL_RUN,
    LABEL_TASK,
    ContainerOutcome,
    ContainerSpec,
    DockerError,
    GpuPassthrough,
    connect,
    engine_address,
    network_problem,
    require_image,
    run_container,
)
from aka_executor_docker.options import DockerOptions, Mount

log = structlog.get_logger("aka.docker")

EXTRA_SECONDS = 1800.0
"""Default container limit beyond the agent's budget: setup, evaluation, reports."""
PROBE_SECONDS = 300.0
PASSED_AKA_ENV = ("AKA_STRICT_PLUGINS", "AKA_DISABLE_PLUGINS")
CONTAINER_LOG = "container.log"


@attrs.frozen(kw_only=True)
class RunInfo:
    """What the executor needs of the run, with the device a container gets."""

    run_dir: Path
    tasks_root: Path
    device: str
    config: RunConfig

    @classmethod
    def of(cls, run: Run) -> RunInfo:
        device, config = run.device, run.config
        if device == DEVICE_ON_NODE:  # chosen inside each container; pass a GPU if one is wanted
            target = config.target_gpu_model
            wanted_gpu = ((target is None or not target.is_cpu)
                          and config.evaluation.device != "cpu")
            device = "cuda" if wanted_gpu else "cpu"
        return cls(run_dir=run.run_dir.resolve(), tasks_root=run.tasks_root.resolve(),
                   device=device, config=config)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "x"


def agent_needs_network(config: RunConfig, host: PluginHost) -> bool:
    """A CLI agent must reach its model over the network; an in-process agent (noop, replay, a
    policy) needs none. Its registration says which (``AgentSpec.needs_network``)."""
    return host.agent(config.agent.name).needs_network


class DockerExecutor:
    def __init__(self, options: DockerOptions):
        self.options = options

    # ------------------------------------------------------------------ the Executor protocol
    def execute(self, run: Run) -> None:
        """Run each task in its own container; ``run.run_task`` (in-process) is not used."""
        if not run.task_ids:
            return
        info = RunInfo.of(run)
        client = connect()
        require_image(client, self.options.image)
        network = (self.options.agent_network if agent_needs_network(run.config, run.host)
                   else "none")
        self.preflight(client, info, network)
        for task_id in run.task_ids:
            run.task_started(task_id)
            self.run_task_container(client, info, task_id, network)
            run.task_finished(task_id)  # the reports are regenerated, with or without a result

    # ------------------------------------------------------------------ aka smoke
    def smoke(self, target: gpus.GpuModel | None) -> list[Check]:
        """Engine reachable, image present, and the runtime checks made inside a container."""
        def check(name: str, ok: bool, detail: str) -> Check:
            return Check(name=name, ok=ok, detail=detail, where="docker")

        try:
            client = connect()
        except DockerError as exc:
            return [check("engine", False, str(exc))]
        version = client.version()
        checks = [check("engine", True, f"docker {version.get('Version')} (API "
                        f"{version.get('ApiVersion')}) at {engine_address()}")]
        try:
            image = require_image(client, self.options.image)
        except DockerError as exc:
            return [*checks, check("image", False, str(exc))]
        checks.append(check("image", True, f"{self.options.image} ({image.short_id})"))
        device = "cuda" if target is not None and not target.is_cpu else "cpu"
        try:
            gpu = self.gpu_for(target, device)
            facts = self.container_facts(client, gpu)
        except DockerError as exc:
            return [*checks, check("container", False, str(exc))]
        checks += runtime_checks(facts, target, where="docker",
                                 gpu_hint=self.gpu_hint(gpu))
        missing, other_version = plugins_missing(facts)
        if missing or other_version:
            checks.append(check("plugins", False, "; ".join(filter(None, [
                f"aka {facts.get('aka')} in the image, {AKA_VERSION} here" if other_version
                else "", f"missing in the image: {', '.join(missing)}" if missing else ""]))
                + ": rebuild the image from this checkout (images/build.sh)"))
        else:
            checks.append(check("plugins", True, f"aka {facts.get('aka')} with every plugin "
                                "a task needs from this host"))
        return checks

    # ------------------------------------------------------------------ pieces
    def gpu_for(self, target: gpus.GpuModel | None, device: str) -> GpuPassthrough | None:
        """The GPUs a container gets: none unless the run evaluates on a GPU."""
        if device != "cuda" or self.options.gpus == "none":
            return None
        vendor = self.options.vendor
        if vendor == "auto":
            vendor = target.vendor if target is not None else None
        if vendor in (None, "auto"):
            vendor = ("nvidia" if os.path.exists("/dev/nvidiactl") else
                      "amd" if os.path.exists("/dev/kfd") else None)
        if vendor is None:
            raise DockerError("cannot tell the GPU vendor from the target or this host: set "
                              "executor.options.vendor to nvidia or amd")
        ids = None if self.options.gpus == "all" else tuple(self.options.gpus)
        return GpuPassthrough(vendor=vendor, ids=ids)

    def gpu_hint(self, gpu: GpuPassthrough | None) -> str:
        if gpu is None:
            return "the container was given no GPU (executor.options.gpus is none)"
        if gpu.vendor == "nvidia":
            return ("the container asked for NVIDIA GPUs: check the NVIDIA Container Toolkit "
                    "(nvidia-ctk runtime configure --runtime=docker), nvidia-smi on the host, "
                    "and that the image's PyTorch is a CUDA build (images/cuda)")
        return ("the container got /dev/kfd and /dev/dri: check that the container user may "
                "open them (groups video, render) and that the image's PyTorch is a ROCm build "
                "(images/rocm)")

    def user(self) -> str:
        return self.options.user or f"{os.getuid()}:{os.getgid()}"

    def environment(self, gpu: GpuPassthrough | None, *, credentials: bool = True) -> dict[str, str]:
        env = {"PYTHONUNBUFFERED": "1", "HOME": "/tmp"}
        for name in (*PASSED_AKA_ENV, *(self.options.pass_env if credentials else ())):
            if name in os.environ:
                env[name] = os.environ[name]
            elif name in self.options.pass_env:
                log.warning("pass_env names a variable that is not set here", variable=name)
        if gpu is not None:
            env["AKA_GPU_LOCK_DIR"] = str(gpu_lock_dir())
        return env

    def container_facts(self, client: Any, gpu: GpuPassthrough | None) -> dict[str, Any]:
        """The runtime facts of a container of the image (``python -m aka_core.commands.smoke --facts``)."""
        command = (self.options.python, "-m", "aka_core.commands.smoke", "--facts")
        spec = ContainerSpec(
            image=self.options.image, command=command, name=f"aka-check-{uuid.uuid4().hex[:10]}",
            network="none", environment=self.environment(None), user=self.user(), gpu=gpu,
            memory=self.options.memory, shm_size=self.options.shm_size,
            pids_limit=self.options.pids_limit, labels={LABEL_RUN: "check"})
        outcome = run_container(client, spec, timeout=PROBE_SECONDS, log_path=None,
                                capture_output=True)
        try:
            if not outcome.ok:
                raise ValueError
            return read_facts(outcome.stdout)
        except ValueError:
            tail = (outcome.stderr or outcome.stdout).strip()[-600:] or "no output"
            raise DockerError(
                f"image {self.options.image!r} cannot run aka: `{' '.join(command)}` "
                f"{'timed out' if outcome.timed_out else f'exited {outcome.exit_code}'}: {tail}. "
                "Build the image from this checkout (images/build.sh), or set "
                "executor.options.python to the image's Python that has aka") from None

    def preflight(self, client: Any, run: RunInfo, network: str) -> dict[str, Any]:
        """Stop the run before its first task when no task could succeed; returns the facts."""
        problem = network_problem(client, network)
        if problem:
            log.warning("agent network", problem=problem)
        missing = [str(m.source) for m in (*self.options.mounts, *self.options.credentials)
                   if not m.source.exists()]
        if missing:
            raise DockerError(f"executor.options mounts or credentials that do not exist on this "
                              f"host: {', '.join(missing)}")
        gpu = self.gpu_for(run.config.target_gpu_model, run.device)
        facts = self.container_facts(client, gpu)
        target = run.config.target_gpu_model
        if run.device == "cuda":
            found = facts.get("gpu")
            if not found:
                raise DockerError(
                    f"no GPU visible inside a container of {self.options.image!r} (PyTorch "
                    f"{facts.get('torch') or 'missing'}), but this run evaluates on "
                    f"{run.config.target_name}: {self.gpu_hint(gpu)}")
            mismatch = gpus.gpu_mismatch(found, target) if target is not None else None
            if mismatch:
                raise DockerError(f"inside the container {mismatch}; change target_gpu_model or "
                                  "executor.options.gpus")
        needed = {"agent": run.config.agent.name, "scorer": run.config.scorer.name}
        absent = [f"{kind} {name!r}" for kind, name in needed.items()
                  if name not in (facts.get("plugins") or {}).get(kind, [])]
        if absent:
            raise DockerError(f"image {self.options.image!r} lacks the {' and '.join(absent)} "
                              "this run uses: rebuild it with that plugin (images/build.sh)")
        if facts.get("aka") != AKA_VERSION:
            log.warning("the image holds another aka version", image_aka=facts.get("aka"),
                        host_aka=AKA_VERSION)
        return facts

    def task_spec(self, run: RunInfo, task_id: str, network: str,
                  phase: str = "all") -> ContainerSpec:
        """The container of one task, or of one phase of it: the evaluation phase gets no
        credentials and no passed-through variables (its network is chosen by the caller)."""
        gpu = self.gpu_for(run.config.target_gpu_model, run.device)
        secrets = () if phase == "evaluate" else self.options.credentials
        mounts = [Mount(source=run.run_dir, target=str(run.run_dir), read_only=False),
                  Mount(source=run.tasks_root, target=str(run.tasks_root), read_only=True),
                  *secrets, *self.options.mounts]
        if gpu is not None:
            lock_dir = gpu_lock_dir()
            mounts.append(Mount(source=lock_dir, target=str(lock_dir), read_only=False))
        return ContainerSpec(
            image=self.options.image,
            command=(self.options.python, "-m", "aka_core.cli", "run-task", str(run.run_dir),
                     task_id, *(("--phase", phase) if phase != "all" else ())),
            name=f"aka-{slug(run.run_dir.name)}-{slug(task_id)}-{uuid.uuid4().hex[:6]}"[:120],
            network=network, mounts=tuple(mounts),
            environment=self.environment(gpu, credentials=phase != "evaluate"),
            user=self.user(), working_dir=str(run.run_dir), gpu=gpu, memory=self.options.memory,
            shm_size=self.options.shm_size, cpus=self.options.cpus,
            pids_limit=self.options.pids_limit,
            labels={LABEL_RUN: str(run.run_dir), LABEL_TASK: task_id},
        )

    def run_task_container(self, client: Any, run: RunInfo, task_id: str, network: str) -> None:
        """One task's container(s), to their end. An agent that needs a network (a CLI agent)
        runs in one container with ``network``; its evaluation then runs in a second one with no
        network and no credentials. A container that fails or is stopped leaves the task without
        a result (a resumed run redoes it); the executor goes on with the next task."""
        if network == "none" and self.options.separate_evaluation != "always":
            self.run_phase(client, run, task_id, network, "all")
            return
        self.run_phase(client, run, task_id, network, "agent")
        done = task_result_path(run.run_dir, task_id).is_file()  # skipped, or failed early
        if not done and (task_dir(run.run_dir, task_id) / AGENT_PHASE_FILE).is_file():
            self.run_phase(client, run, task_id, "none", "evaluate")

    def run_phase(self, client: Any, run: RunInfo, task_id: str, network: str,
                  phase: str) -> None:
        spec = self.task_spec(run, task_id, network, phase)
        timeout = self.options.timeout_seconds or (run.config.agent.timeout_seconds
                                                   + EXTRA_SECONDS)
        # Streamed beside the task folder: `aka run-task` sets aside a task folder it finds.
        staging = run.run_dir / ".containers" / f"{slug(task_id)}.{spec.name}.log"
        staging.parent.mkdir(parents=True, exist_ok=True)
        _append(staging, f"[aka] {now_iso()} container {spec.name} of {spec.image} for {task_id} "
                f"(phase {phase}): network {network}, gpu {spec.gpu or 'none'}, memory "
                f"{spec.memory}, pids {spec.pids_limit}, limit {timeout:.0f} s\n")
        log.info("task container", task=task_id, container=spec.name, network=network)
        final = task_dir(run.run_dir, task_id) / "logs" / CONTAINER_LOG
        try:
            outcome = run_container(client, spec, timeout=timeout, log_path=staging,
                                    keep=self.options.keep_containers)
            # After the agent phase the evaluation container follows: no result yet is expected.
            has_result = phase == "agent" or task_result_path(run.run_dir, task_id).is_file()
            _append(staging, f"[aka] {now_iso()} {describe(outcome, spec)}" + (
                "" if has_result else "; the task has no result: resume the run to redo it")
                + "\n")
        except DockerError:
            raise
        except Exception as exc:  # the engine went away mid-run: no later task could run
            raise DockerError(f"lost the docker engine while running {task_id}: "
                              f"{type(exc).__name__}: {exc}; resume the run once it is back "
                              "(aka run --resume RUN_DIR)") from None
        finally:  # also on an interrupt: the log goes where a resumed run keeps it
            final.parent.mkdir(parents=True, exist_ok=True)
            with final.open("a", encoding="utf-8") as out:  # both phases end up in one log
                out.write(staging.read_text(encoding="utf-8", errors="replace"))
            staging.unlink()
            _remove_if_empty(staging.parent)
        if has_result:
            log.info("task container finished", task=task_id, exit_code=outcome.exit_code,
                     seconds=outcome.seconds)
        else:
            log.warning("task container left no result", task=task_id,
                        outcome=describe(outcome, spec), log=str(final))


def make_executor(options: DockerOptions) -> DockerExecutor:
    """The record's factory: ``options`` typed by the core from the run config's
    ``executor.options`` (``ExecutorSpec.make``)."""
    return DockerExecutor(options)


def plugins_missing(facts: Mapping[str, Any]) -> tuple[list[str], bool]:
    """Plugins of this host (other than executors) that the image lacks; and whether its aka
    version differs from this one."""
    theirs = facts.get("plugins") or {}
    missing = [f"{r.record.kind} {r.record.name}" for r in PluginHost().registered()
               if r.record.kind != "executor" and r.record.name not in theirs.get(r.record.kind, [])]
    return sorted(missing), facts.get("aka") != AKA_VERSION


def gpu_lock_dir() -> Path:
    """The host folder of the evaluation workers' GPU locks, shared with every container (and with
    local runs that set the same AKA_GPU_LOCK_DIR), so only one evaluation times a GPU at once."""
    return gpus.gpu_lock_dir().resolve()


def describe(outcome: ContainerOutcome, spec: ContainerSpec) -> str:
    if outcome.timed_out:
        return f"killed at its limit after {outcome.seconds:.0f} s"
    text = f"exit code {outcome.exit_code} after {outcome.seconds:.1f} s"
    if outcome.oom_killed:
        text += f" (killed for memory: the limit is {spec.memory}; raise executor.options.memory)"
    return text


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(text)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
