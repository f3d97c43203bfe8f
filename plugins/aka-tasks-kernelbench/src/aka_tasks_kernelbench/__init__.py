"""kernelbench: KernelBench-style problems as aka tasks.

A task folder holds one problem file (``class Model(nn.Module)``, ``get_inputs()``,
``get_init_inputs()``, sizes as module-level integer constants) and optionally ``model_new.py``
(the ``ModelNew`` the agent starts from). The format makes the task aka runs in a folder of its own
(never writing into the user's): ``problem.py`` (a copy), ``model_new.py`` (the editable file),
and two protected files that adapt the problem to aka's contract (``shims``): inputs from
``get_inputs()`` under aka's seeds on the evaluation's device, the reference and the baseline from
``Model``, the candidate from ``ModelNew``. Cases: the problem's own sizes; on a GPU, two held-out
cases draw ``batch_size`` (when the problem has one) between half and all of it.

The made folder lives under ``AKA_KERNELBENCH_CACHE`` (default
``$XDG_CACHE_HOME/aka/kernelbench``), named after the digest of the problem's files, so the same
problem always maps to the same folder and a changed one to a new folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from aka_core.plugin import (
    TASK_FILE,
    Case,
    ConfigError,
    HeldOutDraws,
    Problem,
    Task,
    TaskFormatSpec,
    TaskRules,
    Tolerance,
    hookimpl,
)
from aka_tasks_kernelbench import problem as problems
from aka_tasks_kernelbench import shims

CACHE_ENV = "AKA_KERNELBENCH_CACHE"
TOLERANCE = Tolerance(rtol=1e-2, atol=1e-2)  # KernelBench's own
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")


def cache_root() -> Path:
    value = os.environ.get(CACHE_ENV)
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aka" / "kernelbench"


def _plugin_version() -> str:
    try:
        return version("aka-tasks-kernelbench")
    except PackageNotFoundError:
        return "0"


class KernelBenchFormat:
    def is_task_dir(self, path: Path) -> bool:
        return (path.is_dir() and not (path / TASK_FILE).exists()
                and problems.problem_file(path) is not None)

    def load(self, task_dir: Path, task_id: str) -> Task:
        source = problems.problem_file(task_dir)
        if source is None:
            raise ConfigError(Problem(
                f"{task_dir}: no KernelBench problem file (exactly one .py file defining "
                "class Model, get_inputs and get_init_inputs)",
                hint="one problem per folder; model_new.py beside it is the starting ModelNew"))
        problems.check_defines(source)
        given_new = task_dir / problems.MODEL_NEW
        if given_new.exists():
            problems.parse(given_new)  # a clear error for a model_new.py that does not parse
        sizes = problems.constants(source)
        root = materialize(task_dir, source, sizes)
        held_out = None
        batch = sizes.get("batch_size")
        if batch is not None and batch >= 2:
            held_out = HeldOutDraws(count=2, params={
                **sizes, "batch_size": {"range": [max(1, batch // 2), batch]}})
        name = task_dir.name
        return Task(
            id=task_id, root=root, format="kernelbench", name=name, backend="python",
            family=task_id.split("/")[0] if "/" in task_id else "kernelbench",
            editable=(problems.MODEL_NEW,), entrypoint="_aka_entry.py:candidate",
            reference="_aka_task.py:reference", baseline="_aka_task.py:baseline",
            inputs="_aka_task.py:make_inputs", cases=(Case(name="problem", params=dict(sizes)),),
            instructions=shims.INSTRUCTIONS.format(held_out=(
                "; on a GPU two held-out cases draw batch_size" if held_out else "")),
            tolerance={dtype: TOLERANCE for dtype in FLOAT_DTYPES},
            description=f"KernelBench-style problem {source.name} from {task_dir}",
            held_out_draws=held_out, rules=TaskRules(torch_compute="allowed"),
            tags=("kernelbench",))


def materialize(task_dir: Path, source: Path, sizes: dict[str, int]) -> Path:
    """The task's own folder (made once per content): problem.py, model_new.py and the shims."""
    problem_text = source.read_bytes()
    given_new = task_dir / problems.MODEL_NEW
    new_text = given_new.read_bytes() if given_new.is_file() else shims.MODEL_NEW.encode()
    digest = hashlib.sha256(b"\0".join([problem_text, new_text, _plugin_version().encode(),
                                        shims.TASK.encode(), shims.ENTRY.encode()])).hexdigest()
    target = cache_root() / f"{task_dir.name}-{digest[:16]}"
    if (target / "_aka_entry.py").is_file():
        return target
    fresh = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    fresh.mkdir(parents=True)
    try:
        (fresh / "problem.py").write_bytes(problem_text)
        (fresh / problems.MODEL_NEW).write_bytes(new_text)
        (fresh / "_aka_task.py").write_text(shims.TASK.format(constants=sorted(sizes)))
        (fresh / "_aka_entry.py").write_text(shims.ENTRY)
        try:
            fresh.rename(target)
        except OSError:  # made meanwhile by another process: theirs is the same
            shutil.rmtree(fresh, ignore_errors=True)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return target


def _format() -> KernelBenchFormat:
    return KernelBenchFormat()


@hookimpl
def aka_register_tasks() -> list[TaskFormatSpec]:
    return [TaskFormatSpec(
        name="kernelbench", factory=_format,
        description="KernelBench-style problems: a folder with one file defining class Model, "
                    "get_inputs and get_init_inputs (ModelNew in model_new.py is the candidate)")]
