"""The task rule ``torch_compute: forbidden``: PyTorch may allocate, reshape and describe tensors,
but the computation itself must be the task's kernels (Triton, CUDA/HIP through aka's native
loaders, FlyDSL).

The judge (trusted) enforces it twice:

* ``check_sources`` reads the candidate's Python files, and the modules of the candidate's folder
  they import, with ``ast`` before anything runs. It reports torch functions and submodules beyond
  allocation and description, imports outside a short allowlist, tensor compute methods, the ``@``
  operator and the reflection builtins that could hide any of these. Bodies of kernel functions
  (``@triton.jit``, ``@flyc.kernel``, ...) are kernel language, where ``x.sum(0)`` or ``a @ b``
  are the kernel's own work, so the method and operator rules skip them.
* ``check_ops`` is the verdict of the run-time check: the runner records the ATen operators that
  ran during a candidate call, and each one outside the allocation / view / copy allowlist is
  PyTorch compute. It sees what no static check can (``x * y`` on tensors, a method reached
  through a variable), so the static check may stay free of false alarms on operators.

Only source can be read, so compiled Python in the candidate's folder is a violation itself: an
import of a module of the folder that would load an extension module or bytecode (Python takes
``helper.so`` over ``helper.py``, and ``helper.pyc`` where no source is), and any such file the
import system could load from the folder. The runners never read bytecode from a side's folder
(``kits.python_backend``), ``__pycache__`` included, so a ``__pycache__`` is left alone here.
"""

from __future__ import annotations

import ast
import importlib.machinery
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

# torch.<name> a candidate may use: dtypes, allocation, tensor description, RNG seeding, and
# torch.cuda, whose members are checked one level further against TORCH_CUDA_ALLOWED. Everything
# else (torch.nn, torch.tanh, torch.ops, torch._C, torch.library, ...) computes or reaches compute.
TORCH_ALLOWED = frozenset({
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16",
    "int32", "int64", "uint8", "bool", "long", "int", "short", "float8_e4m3fn", "float8_e5m2",
    "complex64", "dtype",
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "tensor", "as_tensor", "arange", "Tensor", "Size", "device", "is_tensor",
    "is_floating_point", "finfo", "iinfo", "no_grad", "inference_mode", "Generator", "manual_seed",
    "__version__", "version", "cuda",
})
# torch.cuda.<name>: streams, events and devices; torch.cuda.comm and the like compute.
TORCH_CUDA_ALLOWED = frozenset({
    "current_stream", "current_device", "device", "get_device_properties", "get_device_capability",
    "is_available", "Stream", "stream", "Event", "synchronize", "default_stream", "set_device",
    "device_count",
})
# Tensor methods that compute (their in-place ``name_`` variants too). The receiver's type is
# unknown to a static check, so a Python object with such a method is a (rare) false alarm.
COMPUTE_METHODS = frozenset({
    "abs", "absolute", "acos", "add", "addcmul", "addcdiv", "addmm", "addmv", "amax", "amin", "any",
    "all", "argmax", "argmin", "argsort", "asin", "atan", "atan2", "baddbmm", "bmm", "ceil", "clamp",
    "clamp_min", "clamp_max", "clip", "cos", "cosh", "cumprod", "cumsum", "diff", "div", "divide",
    "dot", "eq", "erf", "erfc", "exp", "exp2", "expm1", "floor", "fmod", "frac", "gather", "ge",
    "gelu", "gt", "index_add", "index_copy", "index_fill", "index_put", "index_select", "isinf",
    "isnan", "kthvalue", "le", "lerp", "log", "log10", "log1p", "log2", "logical_and",
    "logical_not", "logical_or", "logsumexp", "lt", "masked_fill", "masked_scatter",
    "masked_select", "matmul", "max", "maximum", "mean", "median", "min", "minimum", "mm", "mul",
    "multiply", "mv", "nan_to_num", "ne", "neg", "negative", "norm", "pow", "prod", "reciprocal",
    "relu", "remainder", "renorm", "round", "rsqrt", "scatter", "scatter_add", "scatter_reduce",
    "sigmoid", "sign", "silu", "sin", "sinh", "softmax", "log_softmax", "sort", "sqrt", "square",
    "std", "sub", "subtract", "sum", "tan", "tanh", "topk", "trace", "tril", "triu", "true_divide",
    "trunc", "var", "where", "xlogy", "einsum", "conv1d", "conv2d", "linear", "layer_norm",
    "rms_norm",
})
# Modules that compute on the host or on the GPU outside the task's kernels, or that reach code,
# attributes or processes by name (and so could hide any PyTorch call from this check).
FORBIDDEN_MODULES = frozenset({
    "importlib", "ctypes", "cffi", "sys", "gc", "inspect", "builtins", "subprocess",
    "multiprocessing", "threading", "socket", "pickle", "marshal", "code", "types", "numpy",
    "scipy", "cupy", "jax", "tensorflow", "os",
})
# Modules a candidate may import besides torch and its own: pure-Python helpers and the kernel
# languages with their loaders. ALLOWED_PACKAGES allow their submodules too.
ALLOWED_MODULES = frozenset({
    "math", "functools", "typing", "dataclasses", "itertools", "operator", "enum", "__future__",
    "aka_core.kits.native",
})
ALLOWED_PACKAGES = frozenset({"triton", "flydsl", "aka_backend_cuda", "aka_backend_hip",
                              "aka_backend_flydsl"})
# The kernel languages: a function decorated from them (triton.jit, flyc.kernel) is a kernel.
KERNEL_PACKAGES = frozenset({"triton", "flydsl"})
# What a native loader returns is a library of the candidate's own kernels: its methods may be
# named like compute methods (``lib.softmax``) and are not PyTorch.
NATIVE_LOADERS = frozenset({"aka_core.kits.native", "aka_backend_cuda", "aka_backend_hip",
                            "aka_backend_flydsl"})
# Members of allowed modules that are escape hatches themselves, with what to say about them.
FORBIDDEN_MEMBERS = {
    ("operator", "attrgetter"): "reaches attributes by name",
    ("operator", "methodcaller"): "calls methods by name",
    ("operator", "matmul"): "is the @ operator, a PyTorch matrix multiply on tensors",
    ("operator", "imatmul"): "is the @= operator, a PyTorch matrix multiply on tensors",
    ("typing", "get_type_hints"): "evaluates strings as code",
}
# Builtins that reach code, attributes or modules by name.
ESCAPE_BUILTINS = frozenset({
    "getattr", "setattr", "delattr", "eval", "exec", "compile", "__import__", "globals", "locals",
    "vars", "open", "breakpoint",
})
# Double-underscore names that describe rather than reach Python internals.
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__name__", "__doc__", "__init__", "__version__"})
ALLOWED_DUNDER_NAMES = frozenset({"__name__", "__doc__", "__file__"})
# ATen operators that allocate, view, copy or describe: everything else that runs during a
# candidate call is PyTorch compute (``mul``, ``gelu``, ``sum``, ``index``, ...). ``arange`` is
# here because the static check allows torch.arange: the two checks must agree on honest code.
ALLOWED_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_",
    "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand",
    "squeeze", "unsqueeze", "contiguous", "clone", "copy_", "_to_copy", "to", "detach", "alias",
    "select", "slice", "split", "split_with_sizes", "chunk", "narrow", "unbind", "flatten",
    "unflatten", "view_as", "expand_as", "lift_fresh", "resize_", "set_", "_reshape_alias",
    "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "arange",
})

# What the import system loads without a source, longest first: extension modules (found before a
# .py of the same name) and legacy bytecode (found where no .py is); .pyo and .pyd are what other
# Pythons and Windows would load.
COMPILED_SUFFIXES = tuple(sorted({*importlib.machinery.EXTENSION_SUFFIXES,
                                  *importlib.machinery.BYTECODE_SUFFIXES, ".pyo", ".pyd"},
                                 key=len, reverse=True))

MAX_SOURCE_BYTES = 16 * 2**20
"""The largest source file read; a larger one is a violation (the judge reads it whole)."""

_TORCH_MODULES = frozenset({(), ("cuda",)})  # paths under torch that are modules, not members
_INFO_CALLS = frozenset({"finfo", "iinfo"})  # their results' .max and .min are numbers
_FIX = "this task's rules forbid PyTorch compute: write the computation in the task's kernel language"
_HIDES = "which this task's rules do not allow because it could hide PyTorch compute"


@attrs.frozen(kw_only=True)
class Violation:
    """One breach of the rule: the file (relative to the candidate folder), its line, what to do."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


def check_sources(root: Path, files: Sequence[str]) -> list[Violation]:
    """The violations in ``files`` (relative to the candidate folder ``root``) and in the modules
    of ``root`` they import, each file checked once. Files that are not ``.py`` or do not exist
    are skipped: they hold no Python to check."""
    root = Path(root).absolute()
    queue = [root / name for name in files]
    seen: set[Path] = set()
    violations: list[Violation] = []
    imported_compiled: set[str] = set()
    while queue:
        path = queue.pop(0)
        if path.suffix != ".py" or not path.is_file() or path.resolve() in seen:
            continue
        seen.add(path.resolve())
        if not path.resolve().is_relative_to(root.resolve()) or _linked(root, path):
            # The judge (not the confined runner) reads here: a source that is a link may name
            # any file of the host, a blocking one (``/proc/kmsg``) holding the judge until its
            # phase ran out, an evaluator's fault, and what it reads is not what the folder holds.
            violations.append(Violation(file=path.relative_to(root).as_posix(), line=None,
                                        message="a link, not a source file: ship the module's "
                                                "source itself in the candidate's folder"))
            continue
        check = _FileCheck(root, path)
        violations += check.violations
        queue += check.modules
        imported_compiled |= check.compiled
    return violations + [v for v in compiled_modules(root) if v.file not in imported_compiled]


def _linked(root: Path, path: Path) -> bool:
    """Whether ``path`` (below ``root``) or a folder on the way to it is a symbolic link."""
    at = path
    while at != root and at.is_relative_to(root):
        if at.is_symlink():
            return True
        at = at.parent
    return False


def _compiled_stem(name: str) -> str | None:
    """The module name a file called ``name`` is imported as when it is compiled code."""
    for suffix in COMPILED_SUFFIXES:
        if name.endswith(suffix) and name[:-len(suffix)].isidentifier():
            return name[:-len(suffix)]
    return None


def compiled_modules(root: Path) -> list[Violation]:
    """Every file of the candidate's folder the import system could load as compiled code: in
    the folder or a subfolder named like a package, outside ``__pycache__``. The walk is capped
    (``workspace.walk``): what lies beyond its caps is not imported by a candidate's relative
    imports either, which name packages by identifiers."""
    from aka_core.run.workspace import walk

    found = []
    for rel in sorted(walk(Path(root)).entries):
        *folders, name = rel.split("/")
        stem = _compiled_stem(name)
        if stem is None or not all(part.isidentifier() for part in folders):
            continue
        module = ".".join(folders if stem == "__init__" else [*folders, stem]) or "the package"
        found.append(Violation(file=rel, line=None, message=(
            f"compiled Python that an import of {module} would load in place of any source, which "
            "this task's rules cannot check: delete it and ship the module's source (.py)")))
    return found


# ATen operators that copy or convert data: allowed, unless the task forbids PyTorch copies
# (``torch_copies: forbidden``: moving the data is the work, as in a transpose).
COPY_OPS = frozenset({"clone", "copy_", "_to_copy", "to", "contiguous"})


def check_ops(ops: Iterable[str], *, copies: bool = False) -> list[str]:
    """The ATen operators among ``ops`` (names of overload packets) that compute, sorted; with
    ``copies``, the operators that copy or convert data count as compute too."""
    allowed = ALLOWED_OPS - COPY_OPS if copies else ALLOWED_OPS
    return sorted({op for op in ops if op not in allowed})


def describe_violations(violations: Sequence[Violation], limit: int = 5) -> str:
    """A one-paragraph failure message: the first ``limit`` violations and how many more."""
    if not violations:
        return ""
    listed = "; ".join(str(v) for v in violations[:limit])
    more = f"; and {len(violations) - limit} more" if len(violations) > limit else ""
    return ("The candidate breaks this task's rule torch_compute: forbidden (PyTorch may only allocate, "
            f"reshape and describe tensors; the computation must be the task's kernels): {listed}{more}.")


@attrs.frozen
class _Import:
    """What one import binds a name to: ``target`` is the module or member's dotted name."""

    target: str
    library: bool  # an allowed module that is not the candidate's own


def _is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


def _forbidden_module(name: str) -> bool:
    return name.split(".")[0] in FORBIDDEN_MODULES


def _allowed_library(name: str) -> bool:
    return name in ALLOWED_MODULES or name.split(".")[0] in ALLOWED_PACKAGES


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _compute_method(name: str) -> bool:
    return name in COMPUTE_METHODS or (name.endswith("_") and name[:-1] in COMPUTE_METHODS)


def _torch_forbidden(path: tuple[str, ...]) -> bool:
    """Whether torch.<path>, used as it is (nothing follows), is beyond the allowlist."""
    if path in _TORCH_MODULES:
        return True  # a module as a value hides what is taken from it later
    if path[0] not in TORCH_ALLOWED:
        return True
    if path[0] == "cuda":
        return path[1] not in TORCH_CUDA_ALLOWED
    return path[0] == "Tensor" and len(path) > 1  # unbound tensor methods: torch.Tensor.add


def _torch_import_forbidden(path: tuple[str, ...]) -> bool:
    """Whether ``import torch.<path>`` / ``from torch... import`` is beyond the allowlist."""
    return path not in _TORCH_MODULES and _torch_forbidden(path)


def _torch_import_message(shown: str) -> str:
    return (f"import of {shown} is not allowed under this task's rules: PyTorch may only allocate, "
            "reshape and describe tensors; write the computation in the task's kernel language")


def _forbidden_import_message(shown: str) -> str:
    return (f"import of {shown} is not allowed under this task's rules: it computes outside the task's "
            "kernels or reaches code by name")


def _chain(node: ast.expr) -> tuple[ast.expr, list[str]]:
    """The root expression of an attribute chain and the attribute names after it."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return node, names[::-1]


def _root_name(node: ast.expr) -> str | None:
    root, _ = _chain(node)
    return root.id if isinstance(root, ast.Name) else None


def _compiled_forms(base: Path, parts: Sequence[str]) -> list[Path]:
    """The compiled files the import system could load for module ``parts`` of folder ``base``
    or for a package on its way (``pkg/__init__.so``, ``pkg/helper.pyc``, ``helper.abi3.so``)."""
    found = []
    for i in range(1, len(parts) + 1):
        path = base.joinpath(*parts[:i])
        for suffix in COMPILED_SUFFIXES:
            for form in (path / f"__init__{suffix}", path.parent / f"{path.name}{suffix}"):
                if form.is_file() or form.is_symlink():
                    found.append(form)
    return found


def _local_module_files(base: Path, parts: Sequence[str]) -> list[Path] | None:
    """The files of module ``parts`` in folder ``base`` (packages' ``__init__.py`` included), or
    None when the candidate's folder has no such module (in source or compiled)."""
    first = base / parts[0]
    if not (first.with_suffix(".py").is_file() or first.is_dir()
            or _compiled_forms(base, parts[:1])):
        return None
    files = []
    for i in range(1, len(parts) + 1):
        path = base.joinpath(*parts[:i])
        if (path / "__init__.py").is_file():
            files.append(path / "__init__.py")
        elif path.with_suffix(".py").is_file():
            files.append(path.with_suffix(".py"))
    return files


class _FileCheck(ast.NodeVisitor):
    """Checks one file; ``violations`` and ``modules`` (local modules it imports) are the result."""

    def __init__(self, root: Path, path: Path):
        self.root = root
        self.path = path
        self.rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        self.violations: list[Violation] = []
        self.modules: list[Path] = []
        self.compiled: set[str] = set()  # compiled files an import here would load (flagged)
        self.in_kernel = False
        self.called: set[int] = set()  # ids of expressions that are the callee of a call
        try:
            if path.stat().st_size > MAX_SOURCE_BYTES:  # a sparse file of terabytes, say
                self._flag(None, f"a source over {MAX_SOURCE_BYTES >> 20} MiB, more than this "
                                 "check reads: ship the kernel's source in smaller files")
                return
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=self.rel)
        except OSError as exc:
            self._flag(None, f"cannot be read ({exc.strerror}): leave the candidate's sources "
                             "readable")
            return
        except SyntaxError as exc:
            self._flag(exc.lineno, f"syntax error: {exc.msg}")
            return
        except (UnicodeDecodeError, ValueError) as exc:
            self._flag(None, f"cannot be read as UTF-8 Python source: {exc}")
            return
        except RecursionError:
            self._too_deep()
            return
        try:
            self._bind(tree)
            self.visit(tree)
        except RecursionError:
            # The visit recurses once per level of the tree, two or three frames each: a sum of
            # 600 terms, which Python compiles and runs, took the judge past its recursion limit,
            # and its failure was the evaluator's (an infra_error, retried in place of the
            # candidate's zero). What this check cannot read is the candidate's violation.
            self._too_deep()
        self.violations.sort(key=lambda v: v.line or 0)

    def _too_deep(self) -> None:
        self._flag(None, "an expression or statement nested deeper than this check reads (a "
                         "sum of hundreds of terms, say): split it into smaller ones")

    def _flag(self, line: int | None, message: str) -> None:
        self.violations.append(Violation(file=self.rel, line=line, message=message))

    # -- what names are bound to, over the whole file (a rebinding anywhere voids an exemption) --

    def _bind(self, tree: ast.Module) -> None:
        bindings: dict[str, list[object]] = {}
        assigned: dict[int, ast.expr] = {}  # id of a Name target -> the value assigned to it alone
        for node in ast.walk(tree):
            for name, binding in self._bindings_of(node):
                bindings.setdefault(name, []).append(binding)
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                assigned[id(node.targets[0])] = node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                assigned[id(node.target)] = node.value
        self.torch_paths: dict[str, tuple[str, ...]] = {"torch": ()}
        self.imported: dict[str, str] = {}
        self.library: set[str] = set()
        self.kernel_names: set[str] = set()
        loaders: set[str] = set()
        for name, found in bindings.items():
            imports = [b for b in found if isinstance(b, _Import)]
            if not imports:
                continue
            torch_targets = [b.target for b in imports if _is_torch(b.target)]
            if torch_targets:
                self.torch_paths[name] = tuple(torch_targets[0].split(".")[1:])
                continue
            self.imported[name] = imports[0].target
            if len(imports) == len(found) and all(b.library for b in imports):
                self.library.add(name)
                roots = {b.target.split(".")[0] for b in imports}
                if roots <= KERNEL_PACKAGES:
                    self.kernel_names.add(name)
                if all(any(b.target == m or b.target.startswith(m + ".") for m in NATIVE_LOADERS)
                       for b in imports):
                    loaders.add(name)

        def only_assigned(name: str, wanted: Callable[[ast.expr], bool]) -> bool:
            found = bindings.get(name, [])
            return bool(found) and all(id(b) in assigned and wanted(assigned[id(b)]) for b in found)

        def loader_call(value: ast.expr) -> bool:
            return isinstance(value, ast.Call) and _root_name(value.func) in loaders

        self.native = {name for name in bindings if only_assigned(name, loader_call)}
        self.info_names: set[str] = set()
        self.info_names = {name for name in bindings if only_assigned(name, self._info_call)}

    def _bindings_of(self, node: ast.AST) -> Iterable[tuple[str, object]]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name if alias.asname else alias.name.split(".")[0]
                yield alias.asname or target, _Import(target, _allowed_library(alias.name))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    continue
                target = f"{module}.{alias.name}" if node.level == 0 else f".{alias.name}"
                library = node.level == 0 and (_allowed_library(module) or _allowed_library(target))
                if alias.name == "torch":
                    target = "torch"  # torch re-exported by some module is torch
                yield alias.asname or alias.name, _Import(target, library)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            yield node.id, node
        elif isinstance(node, ast.arg):
            yield node.arg, node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.ExceptHandler
                        | ast.MatchAs | ast.MatchStar) and node.name:
            yield node.name, node
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest, node
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                yield name, node

    def _info_call(self, node: ast.expr) -> bool:
        """Whether ``node`` is ``torch.finfo(...)`` / ``iinfo(...)``, or a name bound only to one."""
        if isinstance(node, ast.Name):
            return node.id in self.info_names
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return name in _INFO_CALLS

    # -- imports --

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            module = alias.name
            if _is_torch(module):
                if _torch_import_forbidden(tuple(module.split(".")[1:])):
                    self._flag(node.lineno, _torch_import_message(module))
                self._shadowing(node, module)
            elif _forbidden_module(module):
                self._flag(node.lineno, _forbidden_import_message(module))
            elif _allowed_library(module):
                self._shadowing(node, module)
            else:
                self._local_import(node, self.root, module.split("."), [], module)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if any(alias.name == "*" for alias in node.names):
            self._flag(node.lineno, f"from {'.' * node.level}{module} import * is not allowed under this "
                                    "task's rules: import the names you use")
        names = [alias.name for alias in node.names if alias.name != "*"]
        if node.level:
            self._relative_import(node, module, names)
        elif _is_torch(module):
            for name in names:
                if _torch_import_forbidden(tuple(f"{module}.{name}".split(".")[1:])):
                    self._flag(node.lineno, _torch_import_message(f"{module}.{name}"))
            self._shadowing(node, module)
        elif _forbidden_module(module):
            self._flag(node.lineno, _forbidden_import_message(module))
        elif _allowed_library(module) or all(_allowed_library(f"{module}.{name}") for name in names):
            for name in names:
                self._check_library_member(node, module, name)
            self._shadowing(node, module)
        else:
            self._local_import(node, self.root, module.split("."), names, module)

    def _check_library_member(self, node: ast.stmt, module: str, name: str) -> None:
        if name in FORBIDDEN_MODULES or name == "torch":
            self._flag(node.lineno, f"import of {name} from {module} is not allowed under this task's "
                                    "rules: import allowed modules directly")
        elif (module, name) in FORBIDDEN_MEMBERS:
            self._flag(node.lineno, f"{module}.{name} {FORBIDDEN_MEMBERS[module, name]}, {_HIDES}")

    def _shadowing(self, node: ast.stmt, module: str) -> None:
        """A module of the candidate's folder named like a library would be imported in its place."""
        top = module.split(".")[0]
        if _local_module_files(self.root, [top]) is not None:
            self._flag(node.lineno, f"the candidate's folder has a module named {top}, like the library "
                                    "it imports, which this task's rules do not allow: rename it")

    def _relative_import(self, node: ast.ImportFrom, module: str, names: Sequence[str]) -> None:
        base = self.path.parent
        for _ in range(node.level - 1):
            base = base.parent
        shown = f"{'.' * node.level}{module}"
        if base != self.root and self.root not in base.parents:
            self._flag(node.lineno, f"relative import {shown} leaves the candidate's folder, which this "
                                    "task's rules do not allow")
            return
        parts = module.split(".") if module else []
        if parts and _local_module_files(base, parts) is None:
            return  # no such module: the import itself fails, there is nothing to check
        self._local_import(node, base, parts, names, shown)

    def _local_import(self, node: ast.stmt, base: Path, parts: list[str], names: Sequence[str],
                      shown: str) -> None:
        """Queue the files of the candidate's module ``parts`` in ``base`` (and of ``names`` where
        they are its submodules); a module that is neither the candidate's nor allowed is flagged."""
        files = _local_module_files(base, parts) if parts else []
        if files is None:
            self._flag(node.lineno, f"import of {shown} is not allowed under this task's rules: import "
                                    "only torch (to allocate and describe tensors), the kernel language "
                                    "and its loader, math/functools-style helpers and the candidate's "
                                    "own modules")
            return
        if not parts and (base / "__init__.py").is_file():
            files.append(base / "__init__.py")
        compiled = _compiled_forms(base, parts) if parts else []
        for name in names:  # `from . import helper`, `from pkg import sub`: a name may be a submodule
            files += _local_module_files(base, [*parts, name]) or []
            compiled += _compiled_forms(base, [*parts, name])
        for path in dict.fromkeys(compiled):
            rel = path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)
            self.compiled.add(rel)
            self._flag(node.lineno, f"import of {shown} would load compiled code, {rel}, in place of any "
                                    "source, which this task's rules cannot check: delete it and ship "
                                    "the module's source (.py)")
        self.modules += files

    # -- functions: kernel bodies are kernel language --

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        outer = self.in_kernel
        self.in_kernel = outer or any(self._kernel_decorator(d) for d in node.decorator_list)
        for statement in node.body:
            self.visit(statement)
        self.in_kernel = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def _kernel_decorator(self, decorator: ast.expr) -> bool:
        """``@triton.jit``, ``@triton.autotune(...)``, ``@tl.constexpr_function``, ``@flyc.kernel``:
        rooted at a name imported from a kernel language (a local ``def jit`` is no kernel)."""
        if isinstance(decorator, ast.Call):
            decorator = decorator.func
        return _root_name(decorator) in self.kernel_names

    # -- expressions --

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_kernel:
            self._flag(node.lineno, f"the @ operator in `{ast.unparse(node)}` is a PyTorch matrix multiply "
                                    f"on tensors; {_FIX}")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_kernel:
            self._flag(node.lineno, f"the @= operator is a PyTorch matrix multiply on tensors; {_FIX}")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self._check_name(node, chain_root=False)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # Only the outermost attribute of a chain gets here: the chain is checked as a whole.
        root, names = _chain(node)
        self._check_chain(node, root, names)
        if isinstance(root, ast.Name):
            self._check_name(root, chain_root=True)
        else:
            self.visit(root)

    def _check_name(self, node: ast.Name, *, chain_root: bool) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        name = node.id
        if name in ESCAPE_BUILTINS:
            self._flag(node.lineno, f"{name} reaches code, attributes or modules by name, {_HIDES}: "
                                    "call and access things directly")
        elif _dunder(name) and name not in ALLOWED_DUNDER_NAMES:
            self._flag(node.lineno, f"{name} reaches Python internals, {_HIDES}")
        elif not chain_root and name in self.torch_paths and _torch_forbidden(self.torch_paths[name]):
            self._flag(node.lineno, self._torch_message(self.torch_paths[name], name))

    def _check_chain(self, node: ast.Attribute, root: ast.expr, names: list[str]) -> None:
        written = ast.unparse(node)
        if not self.in_kernel:
            for name in names:
                if _dunder(name) and name not in ALLOWED_DUNDER_ATTRIBUTES:
                    self._flag(node.lineno, f"attribute {name} in `{written}` reaches Python internals, "
                                            f"{_HIDES}: use the object's public interface")
                    return
        root_name = root.id if isinstance(root, ast.Name) else None
        if root_name in self.torch_paths:
            path = self.torch_paths[root_name] + tuple(names)
            if _torch_forbidden(path):
                self._flag(node.lineno, self._torch_message(path, written))
            return
        if root_name in self.imported:
            for name in names:
                if name in FORBIDDEN_MODULES or name == "torch":
                    self._flag(node.lineno, f"`{written}` reaches the module {name} through "
                                            f"{root_name}, {_HIDES}")
                    return
            member = (self.imported[root_name], names[0])
            if member in FORBIDDEN_MEMBERS:
                self._flag(node.lineno, f"{'.'.join(member)} {FORBIDDEN_MEMBERS[member]}, {_HIDES}")
                return
        if self.in_kernel or root_name in self.library or root_name in self.native:
            return  # kernel language, a library module (math.exp, tl.exp) or the candidate's kernels
        for i, name in enumerate(names):
            if not _compute_method(name):
                continue
            called = i == len(names) - 1 and id(node) in self.called
            if not called and i == 0 and name in ("max", "min") and self._info_call(root):
                continue  # torch.finfo(dtype).max is a number
            what = f".{name}(...)" if called else f".{name}"
            self._flag(node.lineno, f"{what} in `{written}` is a PyTorch compute method; {_FIX} (if the "
                                    "object is not a tensor this is a false alarm of the static check: "
                                    "compute it another way or rename the method)")
            return

    def _torch_message(self, path: tuple[str, ...], written: str) -> str:
        full = ".".join(("torch", *path))
        shown = full if written == full else f"{full} (written `{written}`)"
        if path in _TORCH_MODULES:
            return (f"{shown} is a PyTorch module used as a value, which hides what is taken from it; "
                    "this task's rules allow only torch.<allocation or description> written out")
        return f"{shown} uses PyTorch beyond allocating, reshaping and describing tensors; {_FIX}"
