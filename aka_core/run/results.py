"""Where a run keeps its records, and reading and writing them.

A run directory holds ``run.yaml`` (the resolved config, task ids, plugins, host facts), one
``<task id>/task_result.yaml`` per task (the record of truth) and ``agent_costs/``. This module is
the one place that knows those paths; reports and comparisons read runs through ``load_run``.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import attrs
import cattrs
import structlog
from ruamel.yaml.error import YAMLError

from aka_core import yamlio
from aka_core.convert import structure, unstructure
from aka_core.errors import EXIT_USAGE, AkaError, Problem
from aka_core.models import TaskResult

log = structlog.get_logger("aka.run")

RUN_FILE = "run.yaml"
TASK_RESULT_FILE = "task_result.yaml"
AGENT_COSTS_DIR = "agent_costs"
REPORTS_DIR = "reports"


def now_iso() -> str:
    """A timestamp as every record of a run writes it (UTC, to the second)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class ResultError(AkaError):
    """A run directory, ``run.yaml`` or ``task_result.yaml`` is missing or cannot be read (the
    folder given is not a run, or a run's files were damaged). Exit status 2."""

    exit_code = EXIT_USAGE

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(problem.render())


def _checked_task_id(task_id: str) -> PurePosixPath:
    """A task id as a relative path; ids like ``../x`` or ``/x`` would escape the run dir."""
    rel = PurePosixPath(task_id)
    if (
        not task_id
        or "\\" in task_id
        or rel.is_absolute()
        or any(part in ("", ".", "..") for part in task_id.split("/"))
    ):
        raise ResultError(Problem(f"invalid task id {task_id!r}",
                                  hint="a task id is a relative path such as family/name"))
    return rel


def task_result_path(run_dir: Path, task_id: str) -> Path:
    """``<run_dir>/<task id>/task_result.yaml`` (the task id keeps its slashes)."""
    return Path(run_dir).joinpath(*_checked_task_id(task_id).parts, TASK_RESULT_FILE)


def agent_cost_path(run_dir: Path, task_id: str) -> Path:
    """``<run_dir>/agent_costs/<task id with '/' as '__'>.json``."""
    _checked_task_id(task_id)
    return Path(run_dir) / AGENT_COSTS_DIR / (task_id.replace("/", "__") + ".json")


def task_dir(run_dir: Path, task_id: str) -> Path:
    """``<run_dir>/<task id>``: the folder of one task's attempt (workspace, baseline, logs)."""
    return run_dir.joinpath(*task_id.split("/"))


def set_aside_interrupted(run_dir: Path, task_id: str) -> None:
    """Move an interrupted attempt's folder to ``.interrupted/`` so nothing recorded is lost."""
    tdir = task_dir(run_dir, task_id)
    if not tdir.exists():
        return
    stamp = dt.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    dest = run_dir / ".interrupted" / stamp / task_id
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(tdir), str(dest))
    log.info("set aside an interrupted attempt", task=task_id, moved_to=str(dest))


def read_run_file(run_dir: Path) -> dict[str, Any]:
    """``run.yaml`` of ``run_dir`` as plain data: the one reader of that file (resuming a run,
    running one of its tasks, reports). A missing folder or file, or one that is not a YAML
    mapping, raises ``ResultError`` naming it (exit status 2)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ResultError(Problem("run directory not found", file=run_dir,
                                  hint="pass the folder that `aka run` printed"))
    run_file = run_dir / RUN_FILE
    if not run_file.is_file():
        raise ResultError(Problem(f"not an aka run directory: no {RUN_FILE}", file=run_dir,
                                  hint="pass the folder that `aka run` printed"))
    run_yaml = _load_yaml_file(run_file, RUN_FILE)
    if not isinstance(run_yaml, dict):
        raise ResultError(Problem(f"{RUN_FILE} must be a mapping", file=run_file))
    return run_yaml


def reports_dir(run_dir: Path) -> Path:
    return Path(run_dir) / REPORTS_DIR


def write_task_result(run_dir: Path, result: TaskResult) -> Path:
    """Write ``result`` atomically to its ``task_result.yaml``; return the path."""
    path = task_result_path(run_dir, result.task_id)
    yamlio.write_yaml_atomic(path, unstructure(result))
    return path


def _load_yaml_file(path: Path, what: str) -> Any:
    try:
        return yamlio.load_plain_yaml(path)
    except FileNotFoundError:
        raise ResultError(Problem(f"{what} not found", file=path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultError(Problem(f"cannot read {what}: {exc}", file=path)) from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ResultError(Problem(f"{what} is not valid YAML: {problem}", file=path, line=line,
                                  hint="the file is corrupt; re-run the task to rewrite it"
                                  )) from None


def read_task_result(path: Path) -> TaskResult:
    """Read one ``task_result.yaml``; a missing, corrupt or invalid file raises ``ResultError``."""
    path = Path(path)
    data = _load_yaml_file(path, "task result")
    if not isinstance(data, dict):
        raise ResultError(Problem(
            f"task result must be a mapping, found {type(data).__name__}", file=path,
            hint="the file is corrupt; re-run the task to rewrite it"))
    try:
        return structure(data, TaskResult)
    except cattrs.BaseValidationError as exc:
        details = "; ".join(cattrs.transform_error(exc, path="task_result"))
        raise ResultError(Problem(f"not a valid task result: {details}", file=path,
                                  hint="the file is corrupt or from another aka version")
                          ) from None
    except (TypeError, ValueError) as exc:
        raise ResultError(Problem(f"not a valid task result: {exc}", file=path)) from None


@attrs.frozen(kw_only=True)
class RunRecord:
    """A run directory as read back: its ``run.yaml`` and the results written so far."""

    run_dir: Path
    run_yaml: dict[str, Any]
    task_ids: tuple[str, ...]
    results: dict[str, TaskResult]
    """Task id -> result, for the tasks that have a ``task_result.yaml`` (in ``task_ids`` order)."""

    @property
    def name(self) -> str:
        return self.run_dir.name

    @property
    def missing_task_ids(self) -> tuple[str, ...]:
        """Selected tasks with no result yet (the run is in progress or was interrupted)."""
        return tuple(t for t in self.task_ids if t not in self.results)


def load_run(run_dir: Path) -> RunRecord:
    """Read ``run.yaml`` and every task's result. Errors name the file that is wrong."""
    run_dir = Path(run_dir)
    run_yaml = read_run_file(run_dir)
    run_file = run_dir / RUN_FILE
    raw_ids = run_yaml.get("task_ids")
    if not isinstance(raw_ids, list) or not all(isinstance(t, str) for t in raw_ids):
        raise ResultError(Problem("task_ids must be a list of task ids", file=run_file,
                                  field="task_ids"))
    task_ids = tuple(dict.fromkeys(raw_ids))  # keep order, drop duplicates
    results: dict[str, TaskResult] = {}
    for task_id in task_ids:
        path = task_result_path(run_dir, task_id)
        if not path.is_file():
            continue
        result = read_task_result(path)
        if result.task_id != task_id:
            raise ResultError(Problem(
                f"task_id is {result.task_id!r} but the file belongs to {task_id!r}",
                file=path, field="task_id", hint="the file was moved or edited by hand"))
        results[task_id] = result
    return RunRecord(run_dir=run_dir, run_yaml=run_yaml, task_ids=task_ids, results=results)
