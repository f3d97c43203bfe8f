"""The builtin ``operator`` task format: ``tasks/<family>/<name>/task.yaml``.

Loading validates ``task.yaml`` against ``schemas/task.schema.json``, structures it into a ``Task``
and checks what a schema cannot: referenced files exist inside the task folder, the entrypoint is
editable, case names are unique, the Python files parse and define the named functions, the cost
expressions evaluate for every case, and held-out draws can be drawn with the cases' params.
Nothing is imported: a task folder is data until the evaluator's worker loads it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cattrs

from aka_core.bounded_files import MAX_NAME_BYTES, MAX_PATH_BYTES
from aka_core.convert import structure
from aka_core.errors import ConfigError, Problem
from aka_core.evaluation.cost import CostError
from aka_core.evaluation.cost import evaluate as evaluate_cost
from aka_core.evaluation.cost import parse as parse_cost
from aka_core.models import TASK_FILE, HeldOutDraws, Task
from aka_core.plugin.records import TaskFormat
from aka_core.schema_validation import (
    field_path,
    load_schema,
    sort_problems,
    validate_document,
)
from aka_core.yamlio import line_of, load_yaml, to_builtin

if TYPE_CHECKING:  # the caller passes its host in; the host registers this format
    from aka_core.plugin.host import PluginHost

CALLABLE_FIELDS = ("entrypoint", "reference", "inputs", "baseline")


class OperatorTaskFormat:
    """Finds folders with a ``task.yaml`` and loads them into ``Task`` models."""

    def is_task_dir(self, path: Path) -> bool:
        return (path / TASK_FILE).is_file()

    def load(self, task_dir: Path, task_id: str) -> Task:
        file = task_dir / TASK_FILE
        source = load_yaml(file)
        if not isinstance(source, Mapping):
            raise ConfigError(Problem("expected a mapping (format, backend, editable, ...)",
                                      file=file, line=1, hint="see docs/task-format.md"))
        data = to_builtin(source)
        problems = validate_document(data, load_schema("task"), file=file, source=source)
        if problems:
            raise ConfigError(problems)
        data.setdefault("name", task_id)
        data.setdefault("baseline", data["entrypoint"])
        try:
            task = structure({**data, "id": task_id, "root": task_dir}, Task)
        except cattrs.BaseValidationError as exc:  # the schema should have caught it
            raise ConfigError(Problem(f"invalid task: {exc!r}", file=file)) from None
        problems = check_task(task, file=file, source=source)
        if problems:
            raise ConfigError(problems)
        return task


def check_task(task: Task, *, file: Path, source: Any) -> list[Problem]:
    """The static checks a schema cannot express, each with the line in ``task.yaml``."""
    problems: list[Problem] = []

    def problem(path: list[str | int], message: str, hint: str | None = None) -> None:
        problems.append(Problem(message, file=file, line=line_of(source, path),
                                field=field_path(path), hint=hint))

    entry_file = task.entrypoint.split(":")[0]
    if entry_file not in task.editable:
        problem(["entrypoint"], f"the entrypoint's file {entry_file!r} is not editable",
                f"add {entry_file!r} to editable")

    root = task.root.resolve()
    present: dict[str, bool] = {}
    for path, rel in _referenced_files(task, source):
        if rel not in present:
            unusable = _unusable_name(rel)
            if unusable is not None:
                # A NUL or a name past the file system's limit made every load a traceback
                # (`aka validate` crashed; the reward service answered the task's requests 500).
                present[rel] = False
                problem(path, f"{rel[:80]!r} cannot be a file name: {unusable}",
                        "name a file of the task folder")
                continue
            present[rel] = _inside(root, rel) and (root / rel).is_file()
            if not _inside(root, rel):
                problem(path, f"{rel!r} is outside the task folder",
                        "reference files by paths relative to the task folder")
            elif not present[rel]:
                problem(path, f"file {rel!r} not found in {task.root}",
                        "create it or fix the path")

    problems += _check_case_names(task, file, source)
    problems += _check_python(task, file, source, present)
    problems += _check_cost(task, file, source)
    problems += _check_draws(task, file, source)
    return sort_problems(problems)


def _referenced_files(task: Task, source: Any) -> Iterator[tuple[list[str | int], str]]:
    for field in CALLABLE_FIELDS:
        # the baseline is a default unless the file names it; point at the entrypoint then
        where = field if field != "baseline" or "baseline" in source else "entrypoint"
        yield [where], getattr(task, field).split(":")[0]
    for index, rel in enumerate(task.editable):
        yield ["editable", index], rel


def _unusable_name(rel: str) -> str | None:
    """Why no file can be at ``rel`` (a NUL, a name or a path longer than
    ``bounded_files`` allows), or None."""
    if "\0" in rel:
        return "it holds a NUL character"
    try:
        encoded = rel.encode()
    except UnicodeEncodeError:
        return "it is not valid Unicode"
    if len(encoded) > MAX_PATH_BYTES or any(len(part) > MAX_NAME_BYTES
                                            for part in encoded.split(b"/")):
        return (f"it is longer than a file system allows ({MAX_NAME_BYTES} bytes a name, "
                f"{MAX_PATH_BYTES} in all)")
    return None


def _inside(root: Path, rel: str) -> bool:
    return (root / rel).resolve().is_relative_to(root)


def _check_case_names(task: Task, file: Path, source: Any) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    located: list[tuple[list[str | int], str]] = []
    for section in ("cases", "held_out_cases"):
        for index, case in enumerate(getattr(task, section)):
            located.append(([section, index, "name"], case.name))
    if task.smoke_case is not None:
        located.append((["smoke_case", "name"], task.smoke_case.name))
    for path, name in located:
        field = field_path(path)
        if name in seen:
            problems.append(Problem(
                f"case name {name!r} is already used by {seen[name]}", file=file,
                line=line_of(source, path), field=field, hint="give every case a unique name"))
        else:
            seen[name] = field
    return problems


def _check_cost(task: Task, file: Path, source: Any) -> list[Problem]:
    """Each cost expression parses and evaluates for every case, and for the draws' extremes."""
    if task.cost is None:
        return []
    problems: list[Problem] = []
    labelled: list[tuple[str, Mapping[str, Any]]] = [
        *((f"case {c.name!r}", c.params) for c in task.cases),
        *((f"held-out case {c.name!r}", c.params) for c in task.held_out_cases),
        *((f"smoke case {c.name!r}", c.params) for c in [task.smoke_case] if c is not None),
        *((f"held-out draw {_describe(p)}", p) for p in _draw_extremes(task.held_out_draws)),
    ]
    for field in ("bytes", "flops"):
        expression = getattr(task.cost, field)
        if expression is None:
            continue
        path: list[str | int] = ["cost", field]
        try:
            parse_cost(expression)
        except CostError as exc:
            problems.append(Problem(
                f"{expression!r} is not a cost expression: {exc}", file=file,
                line=line_of(source, path), field=field_path(path),
                hint="use numbers, the cases' params, + - * / // % **, min, max, ceil, floor "
                     "and bytes_of(dtype)"))
            continue
        failures: dict[str, list[str]] = {}
        for label, params in labelled:
            try:
                evaluate_cost(expression, params)
            except (ValueError, ArithmeticError, RecursionError) as exc:  # CostError is a ValueError
                failures.setdefault(str(exc), []).append(label)
        for error, labels in failures.items():
            more = f" (and {len(labels) - 1} more)" if len(labels) > 1 else ""
            problems.append(Problem(
                f"cannot be evaluated for {labels[0]}{more}: {error}", file=file,
                line=line_of(source, path), field=field_path(path),
                hint="the expression may use only the params every case has"))
    return problems


def _draw_extremes(draws: HeldOutDraws | None) -> list[dict[str, Any]]:
    """The draws' lowest and highest params, every choice appearing at least once."""
    if draws is None:
        return []
    choices = [len(s["choice"]) for s in draws.params.values() if _is_spec(s, "choice")]
    extremes = []
    for index, highest in [*((i, False) for i in range(max([1, *choices]))), (-1, True)]:
        params: dict[str, Any] = {}
        for name, spec in draws.params.items():
            if _is_spec(spec, "range"):
                lo, hi = (int(v) for v in spec["range"])
                step = int(spec.get("multiple_of", 1))
                params[name] = hi // step * step if highest else -(-lo // step) * step
            elif _is_spec(spec, "choice"):
                params[name] = spec["choice"][index % len(spec["choice"])]
            else:
                params[name] = spec
        if params not in extremes:
            extremes.append(params)
    return extremes


def _is_spec(spec: Any, kind: str) -> bool:
    return isinstance(spec, Mapping) and kind in spec


def _describe(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in params.items()) or "without params"


def _check_draws(task: Task, file: Path, source: Any) -> list[Problem]:
    """Every range of the held-out draws holds a value; the draws set the cases' params."""
    draws = task.held_out_draws
    if draws is None:
        return []
    problems: list[Problem] = []

    def problem(path: list[str | int], message: str, hint: str) -> None:
        problems.append(Problem(message, file=file, line=line_of(source, path),
                                field=field_path(path), hint=hint))

    for name, spec in draws.params.items():
        if not _is_spec(spec, "range"):
            continue
        lo, hi = (int(v) for v in spec["range"])
        path: list[str | int] = ["held_out_draws", "params", name]
        step = int(spec.get("multiple_of", 1))
        if lo > hi:
            problem(path, f"range [{lo}, {hi}] is empty: its low end is above its high end",
                    "write the range as [low, high], both included")
        elif -(-lo // step) * step > hi:
            problem(path, f"no multiple of {step} lies in the range [{lo}, {hi}]",
                    "widen the range or change multiple_of")
    case_params = {name for case in task.cases for name in case.params}
    missing = sorted(case_params - set(draws.params))
    extra = sorted(set(draws.params) - case_params)
    path = ["held_out_draws", "params"]
    if missing:
        problem(path, f"draws no {', '.join(missing)}, which the cases set",
                "give every param of the cases a value, a range or a choice")
    if extra:
        problem(path, f"draws {', '.join(extra)}, which no case sets",
                "draw the same params as the cases (the inputs factory reads those)")
    return problems


def _check_python(task: Task, file: Path, source: Any, present: dict[str, bool]) -> list[Problem]:
    problems: list[Problem] = []
    trees: dict[str, ast.Module | None] = {}
    python_files = [rel for rel in present if present[rel] and rel.endswith(".py")]
    for rel in python_files:
        path = task.root / rel
        try:
            trees[rel] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            trees[rel] = None
            problems.append(Problem(f"syntax error: {exc.msg}", file=path, line=exc.lineno,
                                    hint="fix the Python syntax"))
        except (OSError, UnicodeDecodeError) as exc:
            trees[rel] = None
            problems.append(Problem(f"cannot read: {exc}", file=path))
        except (RecursionError, MemoryError):  # the parser's own limit, not a SyntaxError
            trees[rel] = None
            problems.append(Problem("nested too deeply for Python's parser", file=path,
                                    hint="split the expression into smaller ones"))
    for field in CALLABLE_FIELDS:
        if field == "baseline" and "baseline" not in source:
            continue  # the default baseline is the entrypoint, checked already
        rel, _, function = getattr(task, field).partition(":")
        tree = trees.get(rel)
        if tree is None or function in _top_level_names(tree):
            continue
        problems.append(Problem(
            f"{rel} defines no {function!r}", file=file, line=line_of(source, [field]),
            field=field, hint=f"define {function}() at module level in {rel}, or fix the name"))
    return problems


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines at top level (functions, classes, assignments, imports).

    Statements under top-level ``if``/``try``/``with`` count too: a kernel module may pick an
    implementation by platform.
    """
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody"):
                pending.extend(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    return names


# --------------------------------------------------------------------------- any format


def task_formats(host: PluginHost) -> list[tuple[str, TaskFormat]]:
    """(name, format) of every registered task format, in the host's order."""
    return [(reg.record.name, reg.record.factory()) for reg in host.registered("task_format")]


def format_of(task_dir: Path, formats: list[tuple[str, TaskFormat]]) -> TaskFormat | None:
    """The first format that recognises ``task_dir`` as a task folder."""
    for _, fmt in formats:
        if fmt.is_task_dir(task_dir):
            return fmt
    return None


def load_task(task_dir: Path, task_id: str, host: PluginHost) -> Task:
    """Load the task in ``task_dir`` with the first registered format that recognises it."""
    formats = task_formats(host)
    fmt = format_of(task_dir, formats)
    if fmt is None:
        names = ", ".join(name for name, _ in formats) or "none"
        raise ConfigError(Problem(
            f"{task_dir} is not a task folder of any installed format ({names})",
            hint=f"an operator task has a {TASK_FILE}"))
    return fmt.load(task_dir, task_id)
