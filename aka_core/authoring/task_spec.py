"""What ``aka task new`` reads from a reference file: its function, its inputs, their shapes.

The reference defines one public function. Each parameter is a tensor or a scalar:

* a parameter with a number default (``eps=1e-6``) is a scalar passed as that number;
* every other parameter is described by one line of a ``Shapes:`` section of the function's
  docstring (or of ``--example-shapes``, which overrides the docstring line of the same name)::

      Shapes:
          x: [M, N]                 a tensor of the case's dtype (``--dtype``, default bfloat16)
          weight: [N] float32       a tensor of a fixed dtype
          ids: [T] int64 < V        integer values drawn from [0, V)
          eps: 1e-6                 a scalar
  (``# text`` after a line is a comment.)

  Dimensions are symbols (upper-case by convention; the cases' params) or integer literals
  (fixed sizes).

Optional one-line sections: ``Sizes: M=8192, N=4096`` (the typical case; missing symbols get a
default), ``Returns: float32`` (the output dtype; default: the first floating-point tensor
input's), ``Flops: 4 * M * N`` (the cost's FLOPs; default 0, a safe lower bound).

Nothing is imported here: the file is parsed with ``ast``. Every error names the file and line
and says what to write instead.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from aka_core.errors import ConfigError, Problem, UsageError
from aka_core.evaluation.cost import CostError
from aka_core.evaluation.cost import parse as parse_cost

FLOAT_DTYPES = ("bfloat16", "float16", "float32", "float64")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")
DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")
# Names a symbol cannot take: the cases' dtype param and the cost expressions' functions.
RESERVED = frozenset({"dtype", "min", "max", "ceil", "floor", "bytes_of"})
SECTIONS = ("Shapes", "Sizes", "Returns", "Flops")
# Local names of the drafted inputs factory, which an input's name must not shadow.
FACTORY_NAMES = frozenset({"case", "seed", "device", "g", "dtype", "torch"})
GUIDE = "docs/task-format.md, 'Drafting and validating a task'"

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TENSOR = re.compile(r"^\[(?P<dims>[^\]]*)\]\s*(?P<dtype>[A-Za-z0-9_]+)?\s*(?:<\s*(?P<bound>\S+))?\s*$")


@attrs.frozen(kw_only=True)
class TensorSpec:
    """A tensor input: its dimensions (symbols or literal sizes), dtype and value bound."""

    name: str
    dims: tuple[str | int, ...]
    dtype: str | None = None
    """None: the case's ``dtype`` param."""
    bound: str | int | None = None
    """Integer tensors: values drawn from ``[0, bound)``."""

    @property
    def symbols(self) -> tuple[str, ...]:
        found = [d for d in self.dims if isinstance(d, str)]
        if isinstance(self.bound, str):
            found.append(self.bound)
        return tuple(found)


@attrs.frozen(kw_only=True)
class ScalarSpec:
    name: str
    value: int | float | bool


InputSpec = TensorSpec | ScalarSpec


@attrs.frozen(kw_only=True)
class ReferenceSpec:
    """A reference function and the inputs it takes, in its parameters' order."""

    path: Path
    function: str
    line: int
    inputs: tuple[InputSpec, ...]
    sizes: dict[str, int]
    returns: str | None
    flops: str | None
    summary: str

    @property
    def tensors(self) -> tuple[TensorSpec, ...]:
        return tuple(i for i in self.inputs if isinstance(i, TensorSpec))

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbol, in order of first appearance."""
        seen: dict[str, None] = {}
        for tensor in self.tensors:
            seen.update(dict.fromkeys(tensor.symbols))
        return tuple(seen)


def read_reference(path: Path, *, function: str | None = None,
                   example_shapes: str | None = None, sizes: str | None = None) -> ReferenceSpec:
    """Parse ``path`` into a ``ReferenceSpec``; ``ConfigError`` says what to fix, and where."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"no reference file at {path}: pass the .py file that defines the "
                         "reference function")
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(Problem(f"syntax error: {exc.msg}", file=path, line=exc.lineno,
                                  hint="fix the Python syntax")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    fn = _the_function(tree, path, function)
    doc_node = _docstring_node(fn)
    sections = _sections(doc_node, path)
    lines = dict(sections.get("Shapes", []))
    shape_lines: dict[str, tuple[str, int | None]] = {
        name: (spec, line) for name, (spec, line) in lines.items()}
    if example_shapes:
        for name, spec in _cli_shapes(example_shapes):
            shape_lines[name] = (spec, None)
    inputs = _inputs(fn, path, shape_lines)
    symbols = {s for i in inputs if isinstance(i, TensorSpec) for s in i.symbols}
    for item in inputs:
        if item.name in symbols or item.name in FACTORY_NAMES:
            what = "a shape's symbol" if item.name in symbols else "a name of the inputs factory"
            raise ConfigError(Problem(
                f"parameter {item.name!r} of {fn.name}() is also {what}", file=path,
                line=fn.lineno, hint="rename the parameter or the symbol (symbols are upper-case "
                                     "by convention: M, N)"))
    size_text, size_line = _one_line(sections, "Sizes")
    typical = _sizes(size_text, path, size_line, "Sizes") if size_text else {}
    if sizes:
        typical.update(_sizes(sizes, None, None, "--sizes"))
    unknown = sorted(set(typical) - symbols)
    if unknown:
        raise ConfigError(Problem(
            f"sizes given for {', '.join(unknown)}, which no input's shape uses",
            file=path if size_text else None, line=size_line,
            hint=f"the shapes use {', '.join(sorted(symbols)) or 'no symbols'}"))
    returns, returns_line = _one_line(sections, "Returns")
    if returns is not None and returns not in DTYPES:
        raise ConfigError(Problem(f"Returns: {returns!r} is not a dtype", file=path,
                                  line=returns_line, hint=f"one of {', '.join(DTYPES)}"))
    flops, flops_line = _one_line(sections, "Flops")
    if flops is not None:
        _check_flops(flops, symbols, path, flops_line)
    return ReferenceSpec(path=path, function=fn.name, line=fn.lineno, inputs=tuple(inputs),
                         sizes=typical, returns=returns, flops=flops,
                         summary=_summary(doc_node))


# --------------------------------------------------------------------------- the function


def _the_function(tree: ast.Module, path: Path, wanted: str | None) -> ast.FunctionDef:
    public = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
              and not n.name.startswith("_")]
    if wanted is not None:
        found = [n for n in public if n.name == wanted]
        if not found:
            names = ", ".join(n.name for n in public) or "none"
            raise ConfigError(Problem(f"defines no public function {wanted!r} (it defines: {names})",
                                      file=path, hint="fix --function"))
        public = found
    if not public:
        raise ConfigError(Problem(
            "defines no public function", file=path,
            hint="define the reference as a module-level function whose name does not start "
                 "with _, e.g. def rms_norm_reference(x, weight, eps=1e-6)"))
    if len(public) > 1:
        listed = ", ".join(f"{n.name} (line {n.lineno})" for n in public)
        raise ConfigError(Problem(
            f"defines {len(public)} public functions: {listed}", file=path, line=public[1].lineno,
            hint="pass --function NAME, or prefix helper functions with _"))
    fn = public[0]
    if isinstance(fn, ast.AsyncFunctionDef):
        raise ConfigError(Problem(f"{fn.name} is async", file=path, line=fn.lineno,
                                  hint="a reference is a plain function: def, not async def"))
    args = fn.args
    if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg:
        raise ConfigError(Problem(
            f"{fn.name} takes positional-only, *args, keyword-only or **kwargs parameters",
            file=path, line=fn.lineno,
            hint="list every input as a plain parameter: def f(x, weight, eps=1e-6)"))
    return fn


def _inputs(fn: ast.FunctionDef, path: Path,
            shape_lines: Mapping[str, tuple[str, int | None]]) -> list[InputSpec]:
    params = [a.arg for a in fn.args.args]
    defaults = dict(zip(params[len(params) - len(fn.args.defaults):], fn.args.defaults,
                        strict=True))
    extra = sorted(set(shape_lines) - set(params))
    if extra:
        name = extra[0]
        raise ConfigError(Problem(
            f"Shapes: names {', '.join(extra)}, which {fn.name}() does not take", file=path,
            line=shape_lines[name][1] or fn.lineno,
            hint=f"its parameters are {', '.join(params) or 'none'}"))
    inputs: list[InputSpec] = []
    for name in params:
        if name in shape_lines:
            spec, line = shape_lines[name]
            inputs.append(_parse_spec(name, spec, path if line else None, line))
        elif name in defaults:
            inputs.append(_scalar_default(name, defaults[name], path))
        else:
            raise ConfigError(Problem(
                f"parameter {name!r} of {fn.name}() has no shape and no number default",
                file=path, line=fn.lineno,
                hint=f"add a line '{name}: [M, N]' (a tensor) or '{name}: 1e-6' (a scalar) to "
                     f"a Shapes: section of its docstring, or pass --example-shapes "
                     f"'{name}: [M, N]' (see {GUIDE})"))
    if not any(isinstance(i, TensorSpec) for i in inputs):
        raise ConfigError(Problem(f"{fn.name}() takes no tensor", file=path, line=fn.lineno,
                                  hint="describe at least one tensor input in Shapes:"))
    return inputs


def _scalar_default(name: str, node: ast.expr, path: Path) -> ScalarSpec:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        value = None
    if not isinstance(value, int | float | bool):
        raise ConfigError(Problem(
            f"parameter {name!r}: its default {ast.unparse(node)} is not a number", file=path,
            line=node.lineno, hint=f"give a number default, or describe {name} in Shapes:"))
    return ScalarSpec(name=name, value=value)


def _parse_spec(name: str, spec: str, path: Path | None, line: int | None) -> InputSpec:
    def fail(message: str, hint: str) -> ConfigError:
        where = "" if path else "--example-shapes: "
        return ConfigError(Problem(f"{where}{name}: {spec!r}: {message}", file=path, line=line,
                                   hint=hint))

    if keyword.iskeyword(name) or not _SYMBOL.fullmatch(name):
        raise fail("not a parameter name", "write NAME: [DIMS] [DTYPE] [< BOUND]")
    match = _TENSOR.match(spec.strip())
    if match is None:
        try:
            value = ast.literal_eval(spec.strip())
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, int | float | bool):
            return ScalarSpec(name=name, value=value)
        raise fail("neither a shape nor a number",
                   "write a tensor as [M, N] (optionally followed by a dtype and '< BOUND' for "
                   "integer values) or a scalar as a number")
    dims: list[str | int] = []
    text = match["dims"].strip()
    for part in [p.strip() for p in text.split(",")] if text else []:
        if part.isdigit() and int(part) > 0:
            dims.append(int(part))
        elif _SYMBOL.fullmatch(part) and not keyword.iskeyword(part) and part not in RESERVED:
            dims.append(part)
        else:
            raise fail(f"dimension {part!r} is not a symbol or a positive integer",
                       f"use names such as M, N (not {', '.join(sorted(RESERVED))}) or sizes "
                       "such as 128")
    dtype = match["dtype"]
    if dtype is not None and dtype not in DTYPES:
        raise fail(f"{dtype!r} is not a dtype", f"one of {', '.join(DTYPES)}")
    bound: str | int | None = None
    if match["bound"] is not None:
        raw = match["bound"]
        if dtype not in INT_DTYPES:
            raise fail("'< BOUND' applies to integer tensors", "e.g. ids: [T] int64 < V")
        if raw.isdigit() and int(raw) > 0:
            bound = int(raw)
        elif _SYMBOL.fullmatch(raw) and raw not in RESERVED:
            bound = raw
        else:
            raise fail(f"bound {raw!r} is not a symbol or a positive integer", "e.g. < V or < 1000")
    elif dtype in INT_DTYPES:
        raise fail("an integer tensor needs the range of its values",
                   f"append '< BOUND', e.g. {name}: {spec.strip()} < V")
    return TensorSpec(name=name, dims=tuple(dims), dtype=dtype, bound=bound)


# --------------------------------------------------------------------------- the docstring


def _docstring_node(fn: ast.FunctionDef) -> ast.Constant | None:
    first = fn.body[0] if fn.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
            first.value.value, str):
        return first.value
    return None


def _summary(node: ast.Constant | None) -> str:
    if node is None:
        return ""
    for line in str(node.value).strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _sections(node: ast.Constant | None, path: Path) -> dict[str, list[tuple[str, tuple[str, int]]]]:
    """The docstring's sections: ``{"Shapes": [(name, (spec, line)), ...], "Sizes": [("", (text,
    line))], ...}``; lines are the file's."""
    if node is None:
        return {}
    found: dict[str, list[tuple[str, tuple[str, int]]]] = {}
    current: str | None = None
    indent = 0
    for offset, raw in enumerate(str(node.value).splitlines()):
        line = node.lineno + offset
        stripped = raw.strip()
        head, colon, rest = stripped.partition(":")
        if head in SECTIONS and colon:
            current, indent = head, len(raw) - len(raw.lstrip())
            found.setdefault(head, [])
            if rest.strip():
                if head == "Shapes":
                    raise ConfigError(Problem(
                        "Shapes: takes one input per line, below it", file=path, line=line,
                        hint="write 'Shapes:' alone, then indented lines such as 'x: [M, N]'"))
                found[head].append(("", (rest.strip(), line)))
                current = None
            continue
        if current != "Shapes":
            continue
        if not stripped or len(raw) - len(raw.lstrip()) <= indent:
            current = None
            continue
        name, sep, spec = stripped.partition(":")
        if not sep:
            raise ConfigError(Problem(f"Shapes: line {stripped!r} has no ':'", file=path,
                                      line=line, hint="write NAME: [DIMS] [DTYPE] [< BOUND]"))
        if any(name.strip() == n for n, _ in found["Shapes"]):
            raise ConfigError(Problem(f"Shapes: {name.strip()} is described twice", file=path,
                                      line=line, hint="keep one line per input"))
        spec = spec.split("#")[0]  # a comment may follow the spec
        found["Shapes"].append((name.strip(), (spec.strip(), line)))
    return found


def _one_line(sections: Mapping[str, Sequence[tuple[str, tuple[str, int]]]], name: str
              ) -> tuple[str | None, int | None]:
    entries = sections.get(name) or []
    if not entries:
        return None, None
    _, (text, line) = entries[0]
    return text, line


def _cli_shapes(text: str) -> list[tuple[str, str]]:
    found = []
    for part in [p.strip() for p in text.split(";") if p.strip()]:
        name, sep, spec = part.partition(":")
        if not sep:
            raise UsageError(f"--example-shapes: {part!r} has no ':'; write 'x: [M, N]; w: [N]'")
        found.append((name.strip(), spec.strip()))
    return found


def _sizes(text: str, path: Path | None, line: int | None, what: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for part in [p for p in re.split(r"[,\s]+", text.strip()) if p]:
        name, sep, value = part.partition("=")
        if not sep or not _SYMBOL.fullmatch(name) or not value.isdigit() or int(value) < 1:
            raise ConfigError(Problem(f"{what}: {part!r} is not SYMBOL=SIZE", file=path, line=line,
                                      hint="e.g. M=8192, N=4096"))
        sizes[name] = int(value)
    return sizes


def _check_flops(flops: str, symbols: set[str], path: Path, line: int | None) -> None:
    try:
        tree = parse_cost(flops)
    except CostError as exc:
        raise ConfigError(Problem(f"Flops: {flops!r}: {exc}", file=path, line=line,
                                  hint="arithmetic over the shapes' symbols, e.g. 2 * M * N * K")) from None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    unknown = sorted(names - symbols - {"min", "max", "ceil", "floor", "bytes_of", "dtype"})
    if unknown:
        raise ConfigError(Problem(f"Flops: {flops!r} uses {', '.join(unknown)}, which no shape "
                                  "uses", file=path, line=line,
                                  hint=f"use the shapes' symbols: {', '.join(sorted(symbols))}"))
