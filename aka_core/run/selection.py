"""Finding tasks under a tasks folder and resolving a run config's task selectors.

A task's id is its folder's path below the tasks folder, with ``/`` separators
(``triton2triton/gelu``). A selector is a task id, or a folder that selects every task below it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aka_core.builtin.operator_tasks import format_of, task_formats
from aka_core.errors import Problem, SelectionError
from aka_core.plugin.host import PluginHost
from aka_core.yamlio import line_of

# Folders that never hold tasks; skipping them keeps discovery fast in a working checkout.
_SKIPPED_FOLDERS = {"__pycache__", "node_modules"}
# How alike (difflib ratio) a task id must be to a selector to be suggested.
_CUTOFF = 0.6


def discover_tasks(tasks_root: Path, host: PluginHost) -> dict[str, Path]:
    """Task id -> folder of every task below ``tasks_root``, sorted by id.

    A folder is a task when a registered task format recognises it; its subfolders are not
    searched (they belong to the task).
    """
    formats = task_formats(host)
    found: dict[str, Path] = {}
    pending = [tasks_root]
    while pending:
        folder = pending.pop()
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            continue
        for child in children:
            if child.name.startswith(".") or child.name in _SKIPPED_FOLDERS:
                continue
            if format_of(child, formats) is not None:
                found[child.relative_to(tasks_root).as_posix()] = child
            else:
                pending.append(child)
    return dict(sorted(found.items()))


def resolve_selectors(
    selectors: Sequence[str],
    tasks_root: Path,
    host: PluginHost,
    *,
    source_file: Path | None = None,
    source_doc: Any = None,
) -> list[str]:
    """The task ids ``selectors`` select, in selector order, each once.

    A selector that selects nothing raises ``SelectionError`` naming the closest task ids and,
    with ``source_doc`` (the run config's ruamel document), the line of that entry in ``tasks``.
    """
    tasks = discover_tasks(tasks_root, host)
    selected: dict[str, None] = {}
    problems: list[Problem] = []
    for index, raw in enumerate(selectors):
        selector = _normalise(raw, tasks_root)
        matches = _match(selector, tasks)
        if matches:
            selected.update(dict.fromkeys(matches))
            continue
        problems.append(Problem(
            _no_match_message(raw, selector, tasks_root, tasks),
            file=source_file,
            line=line_of(source_doc, ["tasks", index]) if source_doc is not None else None,
            field=f"tasks[{index}]",
            hint=_suggest(selector, tasks),
        ))
    if problems:
        raise SelectionError(problems)
    return list(selected)


def _normalise(selector: str, tasks_root: Path) -> str:
    """The selector relative to ``tasks_root``; "" selects every task."""
    text = selector.strip().replace("\\", "/").strip("/")
    while text.startswith("./"):
        text = text[2:]
    if text == ".":
        return ""
    # "tasks/triton2triton/gelu" is what tab completion gives from the checkout's root
    name = tasks_root.name
    if text == name and not _is_folder(tasks_root / name):
        return ""
    if text.startswith(f"{name}/") and not _is_folder(tasks_root / text):
        return text[len(name) + 1:]
    return text


def _is_folder(path: Path) -> bool:
    """Whether ``path`` is a folder; False where no file could have that name (a name over 255
    bytes raised ``OSError: File name too long`` through `aka validate` and `aka run`)."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _match(selector: str, tasks: dict[str, Path]) -> list[str]:
    if not selector:
        return list(tasks)
    if selector in tasks:
        return [selector]
    return [task_id for task_id in tasks if task_id.startswith(selector + "/")]


def _no_match_message(raw: str, selector: str, tasks_root: Path, tasks: dict[str, Path]) -> str:
    if not tasks:
        return f"no tasks found under {tasks_root}, so {raw!r} selects nothing"
    if selector and _is_folder(tasks_root / selector):
        return f"folder {selector!r} under {tasks_root} holds no task folder"
    return f"no task or folder {raw!r} under {tasks_root}"


def _suggest(selector: str, tasks: dict[str, Path]) -> str | None:
    """The closest task ids or folders, or some known ids when nothing is close."""
    if not tasks:
        return None
    folders = {task_id.rsplit("/", 1)[0] for task_id in tasks if "/" in task_id}
    scored: list[tuple[float, str]] = []
    for candidate in [*tasks, *sorted(folders)]:
        if selector.startswith(candidate + "/"):
            continue  # an existing ancestor of the selector says nothing new
        scored.append((_closeness(selector, candidate), candidate))
    scored.sort(key=lambda item: -item[0])
    if scored and scored[0][0] >= _CUTOFF:
        best = scored[0][0]
        names = [name for score, name in scored[:3] if score >= max(_CUTOFF, best - 0.1)]
        return "did you mean " + " or ".join(repr(n) for n in names) + "?"
    return f"known tasks include {', '.join(list(tasks)[:5])}"


def _closeness(selector: str, candidate: str) -> float:
    """How alike two ids are; ids in the same folder (or a bare name) compare by their last part.

    Comparing whole ids would rank every sibling high, since they share the folder prefix.
    """
    sel_parent, _, sel_leaf = selector.rpartition("/")
    cand_parent, _, cand_leaf = candidate.rpartition("/")
    whole = difflib.SequenceMatcher(None, selector, candidate).ratio()
    if sel_parent == cand_parent or not sel_parent:
        leaf = difflib.SequenceMatcher(None, sel_leaf, cand_leaf).ratio()
        if sel_leaf and sel_leaf in cand_leaf:  # a partial name: "fp8" for "fp8_quantize"
            leaf = max(leaf, 0.9)
        return leaf if sel_parent else max(whole, leaf)
    return whole
