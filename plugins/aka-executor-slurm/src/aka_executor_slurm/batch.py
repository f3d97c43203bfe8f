"""Batch scripts: what each Slurm job runs.

Every job runs ``PYTHON -m aka_core.cli run-task RUN_DIR TASK_ID`` against the shared run
directory. All sbatch options are ``#SBATCH`` lines of the script, so a script under
``<run>/.slurm/scripts/`` can be read, or submitted again by hand, as it is.

Slurm writes a job's output to ``<run>/.slurm/logs/``, not into the task's folder: ``aka run-task``
sets an existing task folder aside before it starts (an earlier, interrupted attempt), which would
move a log that Slurm opened there. When ``aka run-task`` returns, the script copies the log to
``<run>/<task>/logs/slurm-<job id>.out``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from aka_executor_slurm.options import SlurmOptions

SLURM_DIR = ".slurm"


def task_slug(task_id: str) -> str:
    """A file-name-safe form of a task id: ``triton2triton/gelu`` -> ``triton2triton.gelu``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", task_id.replace("/", "."))


def _directives(options: SlurmOptions, *, job_name: str, output: str, run_dir: Path,
                array: str | None = None) -> list[str]:
    args = [f"--job-name={job_name}", f"--output={output}", "--open-mode=append",
            f"--chdir={run_dir}", "--nodes=1", "--ntasks=1"]
    for flag, value in (("partition", options.partition), ("account", options.account),
                        ("qos", options.qos), ("time", options.time),
                        ("gres", options.gres_list()), ("cpus-per-task", options.cpus_per_task),
                        ("mem", options.mem), ("array", array)):
        if value is not None:
            args.append(f"--{flag}={value}")
    args += options.extra_sbatch_args
    return [f"#SBATCH {arg}" for arg in args]


def _launcher(options: SlurmOptions, run_dir: Path, tasks_root: Path) -> list[str]:
    """The command words before ``-m aka_core.cli``: the interpreter, inside srun for containers."""
    if not options.container_image:
        return [options.interpreter]
    mounts = [f"{run_dir}:{run_dir}", f"{tasks_root}:{tasks_root}", *options.container_mounts]
    return ["srun", "--ntasks=1", f"--container-image={options.container_image}",
            f"--container-mounts={','.join(mounts)}", f"--container-workdir={run_dir}",
            *options.container_options, options.interpreter]


def _body(options: SlurmOptions, run_dir: Path, tasks_root: Path, job_ref: str,
          slurm_log: str) -> list[str]:
    """Shell lines run once ``TASK_ID`` is set. ``job_ref`` and ``slurm_log`` may use variables."""
    run = shlex.quote(str(run_dir))
    command = " ".join(shlex.quote(w) for w in _launcher(options, run_dir, tasks_root))
    lines = [
        f'echo "aka: job {job_ref}, task $TASK_ID, host $(hostname), '
        'CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"',
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(options.environment.items())]
    lines += list(options.setup_commands)
    lines += [
        f'{command} -m aka_core.cli run-task {run} "$TASK_ID"',
        "status=$?",
        f'if [ -d {run}/"$TASK_ID"/logs ]; then',
        f'  cp -- "{slurm_log}" {run}/"$TASK_ID"/logs/slurm-{job_ref}.out || true',
        "fi",
        'exit "$status"',
    ]
    return lines


def _header(what: str, run_dir: Path) -> list[str]:
    return ["#!/bin/bash", f"# aka: {what} of run {run_dir}",
            "# Written by aka-executor-slurm; `sbatch` this file to run it again by hand."]


def task_script(options: SlurmOptions, *, run_dir: Path, tasks_root: Path, task_id: str,
                log_dir: Path) -> str:
    """A batch script that runs one task."""
    slug = task_slug(task_id)
    lines = _header(f"task {task_id}", run_dir)
    lines += _directives(options, job_name=f"{options.job_name}-{slug}",
                         output=str(log_dir / f"{slug}-%j.out"), run_dir=run_dir)
    lines += ["", f"TASK_ID={shlex.quote(task_id)}"]
    lines += _body(options, run_dir, tasks_root, "${SLURM_JOB_ID}",
                   f"{log_dir}/{slug}-${{SLURM_JOB_ID}}.out")
    return "\n".join(lines) + "\n"


def array_script(options: SlurmOptions, *, run_dir: Path, tasks_root: Path,
                 task_ids: Sequence[str], log_dir: Path) -> str:
    """A job array script: element ``i`` runs ``task_ids[i]``."""
    spec = f"0-{len(task_ids) - 1}"
    if options.max_concurrent:
        spec += f"%{options.max_concurrent}"
    lines = _header(f"{len(task_ids)} tasks", run_dir)
    lines += _directives(options, job_name=f"{options.job_name}-{run_dir.name}",
                         output=str(log_dir / "array-%A_%a.out"), run_dir=run_dir, array=spec)
    lines += ["", "TASKS=("] + [f"  {shlex.quote(t)}" for t in task_ids] + [")"]
    lines += ['TASK_ID="${TASKS[$SLURM_ARRAY_TASK_ID]}"']
    job_ref = "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
    lines += _body(options, run_dir, tasks_root, job_ref, f"{log_dir}/array-{job_ref}.out")
    return "\n".join(lines) + "\n"
