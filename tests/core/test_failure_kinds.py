"""The failure kinds of an evaluation record are one enum, documented, and used everywhere.

``FailureKind``'s values are the strings records on disk hold, so they are pinned here. Task
results type ``evaluation.failure`` loosely (schemas/task_result.schema.json lets the evaluator's
record grow), so the list of kinds a reader can meet is the table of docs/measurement.md ("From
record to result"): it and the enum must name the same kinds. And no module of the core or of a
plugin may spell a kind as a bare string where it makes or compares one.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import aka_core.evaluation.failures
from aka_core.evaluation.failures import CANDIDATE_FAILURES, TIMING_FAILURES, FailureKind

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "aka_core", *sorted((REPO / "plugins").glob("aka-*/src"))]
VALUES = {kind.value for kind in FailureKind}


def test_the_values_are_the_strings_records_hold() -> None:
    on_disk = {
        "compile", "compile_ok_runtime_error", "correctness", "precision", "policy",
        "timing_check", "impossible_time", "interference", "protocol", "timeout", "crashed",
        "resources", "task_error", "infra_error"}
    assert on_disk == VALUES
    assert FailureKind("infra_error") is FailureKind.INFRA_ERROR
    assert f"{FailureKind.TIMEOUT}" == "timeout" and FailureKind.TIMEOUT == "timeout"


def test_every_kind_is_the_candidates_the_tasks_or_the_evaluators() -> None:
    assert TIMING_FAILURES <= CANDIDATE_FAILURES
    assert set(FailureKind) - CANDIDATE_FAILURES == {FailureKind.TASK_ERROR,
                                                    FailureKind.INFRA_ERROR}


def test_every_member_has_a_docstring() -> None:
    tree = ast.parse(Path(aka_core.evaluation.failures.__file__).read_text(encoding="utf-8"))
    body = next(node for node in tree.body
                if isinstance(node, ast.ClassDef) and node.name == "FailureKind").body
    documented = {
        statement.targets[0].id
        for statement, following in itertools.pairwise(body)
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name)
        and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
        and isinstance(following.value.value, str) and "fault" in following.value.value}
    assert documented == {kind.name for kind in FailureKind}


def test_the_documented_kinds_are_the_members() -> None:
    text = (REPO / "docs" / "measurement.md").read_text(encoding="utf-8")
    section = text.split("## From record to result", 1)[1]
    table = next(block for block in section.split("\n\n") if block.startswith("| failure kind"))
    first_cells = [row.split("|")[1] for row in table.splitlines() if row.startswith("|")]
    documented = {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    assert documented - VALUES == set(), "kinds in the table that are no members"
    assert VALUES - documented == set(), "members missing from the table"


# --------------------------------------------------------------------------- no bare kind strings


def _is_kind_target(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name == "kind" or name.endswith("_kind")


def _strings(node: ast.AST | None) -> list[ast.Constant]:
    """String constants that ``node`` evaluates to (directly, in a tuple or set, or a branch)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [c for element in node.elts for c in _strings(element)]
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    return []


def bare_kinds(source: str) -> list[tuple[int, str]]:
    """(line, value) of every kind spelled as a string where a kind is made or compared."""
    found: list[ast.Constant] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", "")
            if (func.endswith("Failure") or func == "StepFailed") and node.args:
                found += _strings(node.args[0])
            found += [c for kw in node.keywords if kw.arg == "kind" for c in _strings(kw.value)]
        elif isinstance(node, ast.Dict):
            found += [c for key, value in zip(node.keys, node.values, strict=True)
                      if isinstance(key, ast.Constant) and key.value == "kind"
                      for c in _strings(value)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_kind_target(side) for side in sides):
                found += [c for side in sides for c in _strings(side)]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_kind_target(target) for target in targets):
                found += _strings(node.value)
    return sorted((c.lineno, c.value) for c in found if c.value in VALUES)


def test_the_scan_finds_bare_kinds() -> None:
    source = (
        'raise JudgeFailure("timeout", "m")\n'
        'record = {"kind": "infra_error", "status": "infra_error"}\n'
        'stopped = exc.kind in ("crashed", "raised")\n'
        'kind = "compile" if x else FailureKind.POLICY\n'
        'class A:\n    baseline_kind: str = "task_error"\n'
        'ok = {"kind": FailureKind.TIMEOUT, "phase": "compile"}\n')
    assert bare_kinds(source) == [(1, "timeout"), (2, "infra_error"), (3, "crashed"),
                                  (4, "compile"), (6, "task_error")]


def test_no_module_spells_a_kind_as_a_string() -> None:
    offenders = [f"{path.relative_to(REPO)}:{line}: {value!r}"
                 for root in SOURCES for path in sorted(root.rglob("*.py"))
                 for line, value in bare_kinds(path.read_text(encoding="utf-8"))]
    assert not offenders, "use aka_core.evaluation.failures.FailureKind:\n" + "\n".join(offenders)
