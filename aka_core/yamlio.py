"""Reading YAML with line numbers, and writing YAML/JSON/text atomically.

Every file aka records is written to a temporary file in the same folder, flushed, fsynced and
renamed over the target: a killed process leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from aka_core.errors import ConfigError, Problem


def _yaml_rt() -> YAML:
    return YAML(typ="rt")


MAX_YAML_BYTES = 16 * 2**20
MAX_YAML_NODES = 200_000
"""Nodes a document may have once its aliases are expanded: a few nested anchors ("billion
laughs") otherwise expand to more than any machine holds when the data is copied."""


def load_yaml(path: Path) -> Any:
    """Load a YAML file keeping positions (``line_of`` reads them). Errors name file and line."""
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise ConfigError(Problem(f"the file is larger than {MAX_YAML_BYTES >> 20} MiB",
                                      file=path, hint="a config or task file is a few KiB"))
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(Problem("file not found", file=path,
                                  hint="check the path")) from None
    except IsADirectoryError:
        raise ConfigError(Problem("is a folder, not a YAML file", file=path,
                                  hint="name the YAML file itself")) from None
    except OSError as exc:
        raise ConfigError(Problem(f"cannot read: {exc}", file=path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(Problem(f"not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x})",
                                  file=path, line=raw[:exc.start].count(b"\n") + 1,
                                  hint="save the file as UTF-8")) from None
    try:
        data = _yaml_rt().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(Problem(f"invalid YAML: {exc.problem or exc.context}", file=path,
                                  line=line, hint="fix the YAML syntax")) from None
    except RecursionError:
        raise ConfigError(Problem("nested too deeply", file=path)) from None
    nodes = expanded_size(data)
    if nodes > MAX_YAML_NODES:
        raise ConfigError(Problem(f"the document expands to more than {MAX_YAML_NODES} values "
                                  "once its aliases (*name) are followed", file=path,
                                  hint="write the values out, or use fewer nested aliases"))
    return data


def expanded_size(data: Any, limit: int = MAX_YAML_NODES) -> int:
    """How many values ``data`` has with every shared (aliased) part counted each time it is
    used; stops counting past ``limit``. Linear in the distinct nodes."""
    sizes: dict[int, int] = {}

    def size(node: Any, depth: int) -> int:
        if not isinstance(node, dict | list | tuple):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if depth > 200:
            return limit + 1
        sizes[key] = limit + 1  # a node that contains itself expands forever
        total = 1
        for child in (node.values() if isinstance(node, dict) else node):
            total += size(child, depth + 1)
            if total > limit:
                break
        sizes[key] = min(total, limit + 1)
        return sizes[key]

    return size(data, 0)


def line_of(data: Any, path: Sequence[str | int]) -> int | None:
    """The 1-based line of the node at ``path`` (or of its nearest existing parent)."""
    node = data
    best: int | None = None
    for part in path:
        if isinstance(node, CommentedMap) and part in node:
            try:
                best = node.lc.key(part)[0] + 1
            except (KeyError, TypeError, AttributeError):
                pass
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
            try:
                best = node.lc.item(part)[0] + 1
            except (KeyError, TypeError, AttributeError):
                pass
            node = node[part]
        else:
            break
    if best is None and hasattr(data, "lc"):
        best = data.lc.line + 1
    return best


def to_builtin(data: Any) -> Any:
    """Plain dicts/lists from ruamel's commented containers (for JSON Schema and cattrs)."""
    if isinstance(data, dict):
        return {str(k): to_builtin(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [to_builtin(v) for v in data]
    return _plain_scalar(data)


def _plain_scalar(value: Any) -> Any:
    """ruamel's scalar subclasses (ScalarFloat, ...) as plain Python values: they would not
    survive the safe dumper or JSON as themselves."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def dump_yaml(data: Any) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[attr-defined]
    yaml.width = 120
    buf = io.StringIO()
    yaml.dump(_plain_for_yaml(data), buf)
    return buf.getvalue()


def _plain_for_yaml(data: Any) -> Any:
    if isinstance(data, dict):
        return {str(k): _plain_for_yaml(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_plain_for_yaml(v) for v in data]
    if isinstance(data, Path):
        return str(data)
    return _plain_scalar(data)


def load_plain_yaml(path: Path) -> Any:
    """Load a YAML file that aka wrote itself (no positions needed)."""
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def write_yaml_atomic(path: Path, data: Any, header: str = "") -> None:
    write_text_atomic(path, header + dump_yaml(data))


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(_plain_for_yaml(data), indent=2, sort_keys=False) + "\n")
