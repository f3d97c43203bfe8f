"""aka_core's modules import each other without cycles.

The graph counts every import statement in a module: module-level ones and the function-local
ones that hide a cycle at import time but keep the modules tangled. `from x import y` points at
`x.y` when that is a module of aka_core, else at `x`. A package depends on its `__init__`'s
imports only; a submodule's import of its package's `__init__` is an edge like any other.

Imports under ``if TYPE_CHECKING:`` are left out: they never run, and a module that only names
the type of a value it is given (the judge passing itself to ``timing.measure``) depends on the
value, not on the module that defines it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aka_core

CORE_ROOT = Path(aka_core.__file__).parent
PACKAGE = "aka_core"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(CORE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def core_modules() -> dict[str, Path]:
    """Every module of aka_core by dotted name."""
    return {_module_name(path): path for path in sorted(CORE_ROOT.rglob("*.py"))}


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _is_type_checking_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The aka_core modules that `module` imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str) -> None:
        # the longest prefix that is a module of aka_core (`aka_core.a.b.c` -> `aka_core.a.b`)
        parts = name.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in modules:
                if candidate != module:
                    found.add(candidate)
                return
            parts.pop()

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    type_only = {id(node) for block in ast.walk(tree) if _is_type_checking_block(block)
                 for statement in block.body for node in ast.walk(statement)}
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                source = _resolve_relative(module, is_package, node.level, node.module)
            else:
                source = node.module or ""
            if source != PACKAGE and not source.startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                add(submodule if submodule in modules else source)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = core_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        # iterative, so a deep graph cannot hit the recursion limit
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                successor = pending.pop(0)
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, sorted(graph[successor])))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    components.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(components)


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle through the component's first module, for the failure message."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for successor in sorted(graph[node] & members):
                if successor == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = parents[node]
                    return [start, *reversed(path[1:]), start]
                if successor not in parents:
                    parents[successor] = node
                    following.append(successor)
        frontier = following
    return component


def test_the_graph_sees_function_local_and_submodule_imports(tmp_path: Path) -> None:
    package = tmp_path / PACKAGE
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "b.py", "sub/__init__.py", "sub/c.py"):
        (package / name).write_text("", encoding="utf-8")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from aka_core import b\n"
        "def f():\n    from aka_core.sub import c\n", encoding="utf-8"
    )
    (package / "sub" / "c.py").write_text("from ..b import thing\n", encoding="utf-8")
    modules = {
        "aka_core": package / "__init__.py",
        "aka_core.a": package / "a.py",
        "aka_core.b": package / "b.py",
        "aka_core.sub": package / "sub" / "__init__.py",
        "aka_core.sub.c": package / "sub" / "c.py",
    }
    assert imports_of("aka_core.a", modules["aka_core.a"], modules) == {"aka_core.sub.c"}
    assert imports_of("aka_core.sub.c", modules["aka_core.sub.c"], modules) == {"aka_core.b"}
    graph = {"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}
    assert strongly_connected(graph) == [["x", "y", "z"]]
    assert a_cycle(graph, ["x", "y", "z"]) == ["x", "y", "z", "x"]


def test_aka_core_has_no_import_cycles() -> None:
    graph = import_graph()
    assert "aka_core.run.execute" in graph and "aka_core.evaluation.judge" in graph
    components = strongly_connected(graph)
    report = "\n".join(
        f"  {' -> '.join(a_cycle(graph, component))}   (cycle among: {', '.join(component)})"
        for component in components
    )
    assert not components, f"import cycles in aka_core:\n{report}"
