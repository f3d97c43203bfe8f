"""aka-v1: tasks in the original AKA per-task ``config.yaml`` format, judged by their commands.

The folder is the task: the agent edits the files ``source_file_path`` names; ``compile_command``,
``correctness_command`` and ``performance_command`` (a string or a list of them, run with
``/bin/sh -c`` in the task's folder) build, check and time it (``aka_core.evaluation.harness``). Timing also
needs ``aka.performance_report``: the JSON file the performance commands write, holding a time
in milliseconds. Every record of such a task says ``trust: harness``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aka_core.plugin import (
    TASK_FILE,
    Case,
    ConfigError,
    Harness,
    Problem,
    Requirements,
    Task,
    TaskFormatSpec,
    TaskRules,
    hookimpl,
)

CONFIG = "config.yaml"
VENDORS = {"hip": ("amd",), "flydsl": ("amd",), "cuda": ("nvidia",)}
KNOWN = {"source_file_path", "target_kernel_functions", "compile_command", "correctness_command",
         "performance_command", "task_type", "prompt", "aka", "description"}
AKA_KEYS = {"performance_report", "time_key", "timeout_s", "cpu"}


def _read(path: Path) -> dict[str, Any]:
    from aka_core.plugin import load_plain_yaml

    try:
        doc = load_plain_yaml(path)
    except Exception as exc:  # the YAML parser's own message names the line
        raise ConfigError(Problem(f"{path}: not valid YAML: {exc}",
                                  hint="fix the YAML syntax")) from None
    if not isinstance(doc, dict):
        raise ConfigError(Problem(f"{path}: expected a mapping of fields",
                                  hint="see the aka-tasks-akav1 README for the fields"))
    return doc


def _commands(doc: dict[str, Any], field: str, path: Path, *, required: bool) -> tuple[str, ...]:
    value = doc.get(field)
    if value is None:
        if required:
            raise ConfigError(Problem(f"{path}: {field} is missing", field=field,
                                      hint=f"give {field} as a command or a list of commands"))
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(Problem(f"{path}: {field} must be a command or a list of commands "
                                  f"(non-empty strings), got {value!r}", field=field))
    return tuple(value)


class AkaV1Format:
    def is_task_dir(self, path: Path) -> bool:
        config = path / CONFIG
        if not path.is_dir() or (path / TASK_FILE).exists() or not config.is_file():
            return False
        try:
            doc = _read(config)
        except ConfigError:
            return True  # ours by its name: load() then says what is wrong with it
        return "source_file_path" in doc and "correctness_command" in doc

    def load(self, task_dir: Path, task_id: str) -> Task:
        path = task_dir / CONFIG
        if not path.is_file():
            raise ConfigError(Problem(f"{task_dir}: no {CONFIG}", hint="an aka-v1 task folder "
                                      "holds config.yaml with source_file_path and the commands"))
        doc = _read(path)
        unknown = sorted(set(doc) - KNOWN)
        if unknown:
            raise ConfigError(Problem(f"{path}: unknown field(s) {', '.join(unknown)}",
                                      field=unknown[0], hint=f"known: {', '.join(sorted(KNOWN))}"))
        sources = doc.get("source_file_path")
        if isinstance(sources, str):
            sources = [sources]
        if not isinstance(sources, list) or not sources or not all(
                isinstance(s, str) for s in sources):
            raise ConfigError(Problem(f"{path}: source_file_path must list the editable files",
                                      field="source_file_path"))
        for rel in sources:
            if Path(rel).is_absolute() or ".." in Path(rel).parts or not (task_dir / rel).is_file():
                raise ConfigError(Problem(f"{path}: source_file_path names {rel!r}, which is not "
                                          "a file inside the task's folder",
                                          field="source_file_path"))
        extra = doc.get("aka") or {}
        if not isinstance(extra, dict) or set(extra) - AKA_KEYS:
            raise ConfigError(Problem(f"{path}: aka must be a mapping of "
                                      f"{', '.join(sorted(AKA_KEYS))}", field="aka"))
        timeout = extra.get("timeout_s", 1800)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ConfigError(Problem(f"{path}: aka.timeout_s must be a positive number of "
                                      "seconds", field="aka.timeout_s"))
        performance = _commands(doc, "performance_command", path, required=False)
        report = extra.get("performance_report")
        if performance and not isinstance(report, str):
            raise ConfigError(Problem(
                f"{path}: performance_command is given but not aka.performance_report",
                field="aka.performance_report",
                hint="name the JSON file the performance commands write (a time in ms)"))
        harness = Harness(compile=_commands(doc, "compile_command", path, required=False),
                          correctness=_commands(doc, "correctness_command", path, required=True),
                          performance=performance, report=report,
                          time_key=extra.get("time_key"), timeout_s=float(timeout))
        task_type = str(doc.get("task_type") or "akav1")
        language = task_type.split("2")[-1]
        targets = doc.get("target_kernel_functions") or []
        if isinstance(targets, str):
            targets = [targets]
        symbol = str(targets[0]) if targets else "main"
        ref = f"{sources[0]}:{symbol}"
        return Task(
            id=task_id, root=task_dir.resolve(), format="aka-v1", name=task_dir.name,
            backend="python", family=task_type, editable=tuple(sources), entrypoint=ref,
            reference=ref, baseline=ref, inputs=ref, cases=(Case(name="harness", params={}),),
            instructions=_instructions(doc, sources, targets, harness),
            tolerance={}, description=str(doc.get("description") or
                                          f"aka-v1 task {task_dir.name} ({task_type})"),
            requires=Requirements(vendors=VENDORS.get(language, ()),
                                  cpu_interpreter=bool(extra.get("cpu", False))),
            rules=TaskRules(), tags=("aka-v1", "harness-trusted"), harness=harness)


def _instructions(doc: dict[str, Any], sources: list[str], targets: list[Any],
                  harness: Harness) -> str:
    prompt = doc.get("prompt") or {}
    given = prompt.get("instructions") if isinstance(prompt, dict) else None
    lines = [str(given).strip()] if isinstance(given, str) and given.strip() else [
        f"Make {', '.join(map(str, targets)) or 'the kernels'} in {', '.join(sources)} faster, "
        "keeping the results correct."]
    lines += ["", f"Edit only: {', '.join(sources)}.",
              "The task is judged by its own commands, run in its folder:"]
    for label, commands in (("build", harness.compile), ("check", harness.correctness),
                            ("time", harness.performance)):
        lines += [f"  {label}: {cmd}" for cmd in commands]
    return "\n".join(lines) + "\n"


def _format() -> AkaV1Format:
    return AkaV1Format()


@hookimpl
def aka_register_tasks() -> list[TaskFormatSpec]:
    return [TaskFormatSpec(
        name="aka-v1", factory=_format, marker_file=CONFIG,
        description="tasks in the original AKA config.yaml format (source_file_path, "
                    "compile/correctness/performance commands), judged by their own commands: "
                    "harness-trusted")]
