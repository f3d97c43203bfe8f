"""A KernelBench-style problem: the file, its model and its size constants, read without running it.

A problem is one Python file defining ``class Model(nn.Module)``, ``get_inputs()`` (the forward
arguments) and ``get_init_inputs()`` (the constructor arguments), with its sizes as module-level
integer constants (``batch_size = 16``) that both functions read. A task folder of this format
holds one such file (any name) and, optionally, ``model_new.py``: a ``class ModelNew`` the agent
starts from (else one that subclasses ``Model``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from aka_core.plugin import ConfigError, Problem

MODEL_NEW = "model_new.py"
SHIM_PREFIX = "_aka_"
MAX_BYTES = 1 << 20
REQUIRED = ("class Model", "def get_inputs", "def get_init_inputs")


def problem_file(folder: Path) -> Path | None:
    """The one problem file in ``folder``, or None (none, several, or not a folder)."""
    try:
        candidates = sorted(p for p in folder.iterdir() if p.suffix == ".py" and p.is_file()
                            and p.name != MODEL_NEW and not p.name.startswith(SHIM_PREFIX))
    except OSError:
        return None
    found = []
    for path in candidates:
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if all(marker in text for marker in REQUIRED):
            found.append(path)
    return found[0] if len(found) == 1 else None


def constants(path: Path) -> dict[str, int]:
    """Module-level integer constants (``name = 123``): the problem's sizes."""
    tree = parse(path)
    found: dict[str, int] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, int) and not isinstance(node.value.value, bool)):
            found[node.targets[0].id] = node.value.value
    return found


def parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(Problem(f"{path}:{exc.lineno}: the problem file does not parse: "
                                  f"{exc.msg}", hint="fix the problem file")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(Problem(f"{path}: cannot read the problem file: {exc}",
                                  hint="a KernelBench problem is a UTF-8 Python file")) from None


def check_defines(path: Path) -> None:
    """``Model``, ``get_inputs`` and ``get_init_inputs`` at module level, or a clear error."""
    tree = parse(path)
    names = {node.name for node in tree.body
             if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    missing = [name for name in ("Model", "get_inputs", "get_init_inputs") if name not in names]
    if missing:
        raise ConfigError(Problem(
            f"{path}: a KernelBench problem defines {', '.join(missing)} at module level",
            hint="class Model(nn.Module), get_inputs() and get_init_inputs(), as KernelBench does"))
