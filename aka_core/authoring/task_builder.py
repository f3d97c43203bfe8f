"""``aka task new --from-reference REF.py``: draft an operator task folder from a reference.

The draft is a complete task (docs/task-format.md) that ``aka validate DIR --run`` accepts on a
CPU: the reference as given, an inputs factory from the reference's shapes (``task_spec``), one
typical case, held-out draws over odd sizes and a prime-sized smoke case (``task_sizes``),
tolerances by dtype, a cost drafted from the shapes, and an initial kernel:

* ``--backend torch``: ``kernel.py`` is the reference's math in plain PyTorch (the baseline);
* ``--backend triton``: the torch2triton layout, ``baseline.py`` is that PyTorch code and
  ``kernel.py`` raises ``NotImplementedError`` until the agent writes the Triton kernel;
  PyTorch compute is forbidden to the candidate.

Drafting runs the reference (and the PyTorch entry point) on two tiny cases, in this process:
that finds the outputs' shapes and dtypes, and a reference that fails on its own inputs is
reported here, at its line, rather than by the evaluator later.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
import traceback
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from aka_core.authoring.task_sizes import Sizes, case_name, plan_sizes
from aka_core.authoring.task_spec import FLOAT_DTYPES, GUIDE, ReferenceSpec, read_reference
from aka_core.authoring.task_templates import (
    describe_inputs,
    render_inputs,
    render_task_yaml,
    render_torch_entry,
    render_triton_stub,
)
from aka_core.errors import AkaError, ConfigError, Problem, UsageError
from aka_core.evaluation.cost import DTYPE_BYTES
from aka_core.models import TASK_FILE

BACKENDS = {"triton": ("triton", "torch2triton"), "torch": ("python", "torch2torch")}
"""``--backend``: (the task's backend, its default family)."""
TOLERANCES: dict[str, dict[str, float]] = {
    "bfloat16": {"rtol": 1.6e-2, "atol": 1.0e-2},
    "float16": {"rtol": 4.0e-3, "atol": 1.0e-3},
    "float32": {"rtol": 1.0e-5, "atol": 1.0e-6},
    "float64": {"rtol": 1.0e-13, "atol": 1.0e-14},
}
TIMEOUTS = {"compile_seconds": 120, "correctness_seconds": 300, "timing_seconds": 300}
_TASK_ID = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@attrs.frozen(kw_only=True)
class Output:
    dims: tuple[str | int, ...] | None
    """Each dimension traced to a symbol or a fixed size; None where one could not be."""
    dtype: str
    mean_abs: float
    exact: bool
    """The reference's values are exactly representable in ``dtype`` (a copy, a gather): a
    correct output equals them."""


@attrs.frozen(kw_only=True)
class Draft:
    path: Path
    task_id: str
    notes: tuple[str, ...]


def draft_task(reference: Path, *, name: str | None = None, out: Path | None = None,
               backend: str = "triton", example_shapes: str | None = None,
               sizes: str | None = None, dtype: str = "bfloat16",
               function: str | None = None) -> Draft:
    """Write a task folder drafted from ``reference``; returns where, and what to review."""
    if backend not in BACKENDS:
        raise UsageError(f"--backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if dtype not in FLOAT_DTYPES:
        raise UsageError(f"--dtype {dtype!r}: choose one of {', '.join(FLOAT_DTYPES)}")
    spec = read_reference(Path(reference), function=function, example_shapes=example_shapes,
                          sizes=sizes)
    backend_name, family = BACKENDS[backend]
    entry = entry_name(spec.function)
    task_id = name or f"{family}/{entry}"
    if not _TASK_ID.match(task_id):
        raise UsageError(f"--name {task_id!r}: write family/name, e.g. torch2triton/rms_norm")
    dest = Path(out) if out else Path("tasks", *task_id.split("/"))
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"{dest} already exists and is not empty: choose another --out or "
                         "remove it")
    case_dtype = dtype if any(t.dtype is None for t in spec.tensors) else None
    plan = plan_sizes(spec)
    source = spec.path.read_text(encoding="utf-8")
    entry_file = "kernel.py" if backend == "torch" else "baseline.py"
    files = {"reference.py": source, "inputs.py": render_inputs(spec, task_id),
             entry_file: render_torch_entry(spec, entry, source)}
    outputs = probe_outputs(spec, files, entry_file, entry, plan, case_dtype)
    notes: list[str] = []
    if backend == "triton":
        files["kernel.py"] = render_triton_stub(spec, entry, describe_inputs(spec, case_dtype),
                                                _describe_outputs(spec, outputs))
    fields, comments = _task_fields(spec, backend_name, family, entry, entry_file, plan,
                                    case_dtype, outputs, notes)
    dest.mkdir(parents=True, exist_ok=True)
    schema = _schema_reference(dest)
    instructions = _instructions(spec, backend, entry, case_dtype, outputs)
    files[TASK_FILE] = render_task_yaml(fields, comments, schema, instructions)
    for rel, text in files.items():
        (dest / rel).write_text(text, encoding="utf-8")
    _check_loads(dest, task_id)
    return Draft(path=dest, task_id=task_id, notes=tuple(notes))


def entry_name(function: str) -> str:
    """The candidate's function: the reference's name without ``_reference`` / ``_ref``."""
    for suffix in ("_reference", "_ref"):
        if function.endswith(suffix) and len(function) > len(suffix):
            return function[: -len(suffix)]
    return function


# --------------------------------------------------------------------------- probing


def probe_outputs(spec: ReferenceSpec, files: Mapping[str, str], entry_file: str, entry: str,
                  plan: Sizes, case_dtype: str | None) -> list[Output]:
    """Run the inputs factory, the reference and the PyTorch entry point on the two tiny probes;
    each output's dims traced to the symbols that have its sizes in both."""
    with tempfile.TemporaryDirectory(prefix="aka-draft-") as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            (root / rel).write_text(text, encoding="utf-8")
        package = f"aka_draft_{uuid.uuid4().hex[:12]}"
        try:
            runs = [_run_probe(root, package, spec, entry_file, entry, sizes, case_dtype)
                    for sizes in (plan.smoke, plan.alt)]
        finally:
            for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
                del sys.modules[module]
    (smoke_outs, smoke_refs), (alt_outs, alt_refs) = runs
    outputs = []
    for index, (first, second) in enumerate(zip(smoke_outs, alt_outs, strict=True)):
        dims: tuple[str | int, ...] | None = tuple(
            _trace(a, b, plan.smoke, plan.alt) for a, b in zip(first[0], second[0], strict=True))
        if dims is not None and any(d is None for d in dims):
            dims = None
        mean_abs, exact = smoke_refs[index] if index < len(smoke_refs) else (0.0, False)
        exact = exact and index < len(alt_refs) and alt_refs[index][1]
        outputs.append(Output(dims=dims, dtype=first[1], mean_abs=mean_abs, exact=exact))
    return outputs


def _trace(smoke_value: int, alt_value: int, smoke: Mapping[str, int], alt: Mapping[str, int]
           ) -> str | int | None:
    for symbol in smoke:
        if smoke[symbol] == smoke_value and alt[symbol] == alt_value:
            return symbol
    return smoke_value if smoke_value == alt_value else None


def _run_probe(root: Path, package: str, spec: ReferenceSpec, entry_file: str, entry: str,
               sizes: Mapping[str, int], case_dtype: str | None
               ) -> tuple[list[tuple[tuple[int, ...], str]], list[tuple[float, bool]]]:
    import torch

    from aka_core.kits.python_backend import PythonBackend

    loader = PythonBackend()
    params: dict[str, Any] = {**sizes, **({"dtype": case_dtype} if case_dtype else {})}
    described = ", ".join(f"{k}={v}" for k, v in params.items())
    try:
        make_inputs = loader.load_callable(root, "inputs.py:make_inputs", package)
        inputs = make_inputs(params, 0, "cpu")
    except Exception as exc:
        raise ConfigError(Problem(
            f"the drafted inputs factory failed on ({described}): {type(exc).__name__}: {exc}",
            file=spec.path, line=spec.line,
            hint=f"check the Shapes: section; see {GUIDE}")) from None
    results = {}
    for label, ref in (("reference", f"reference.py:{spec.function}"),
                       ("entry", f"{entry_file}:{entry}")):
        try:
            fn = loader.load_callable(root, ref, package)
            with torch.no_grad():
                results[label] = fn(**inputs)
        except Exception as exc:
            raise _reference_failure(exc, root, spec, described) from None
    refs = _tensors(results["reference"], spec)
    outs = _tensors(results["entry"], spec)
    facts = [(float(r.detach().double().abs().nan_to_num(0.0, 0.0, 0.0).mean()) if r.numel()
              else 0.0, _representable(r, o.dtype)) for r, o in zip(refs, outs, strict=False)]
    return [(tuple(o.shape), str(o.dtype).removeprefix("torch.")) for o in outs], facts


def _representable(ref: Any, dtype: Any) -> bool:
    """Whether a reference finer than ``dtype`` holds only values of ``dtype``."""
    import torch

    if not dtype.is_floating_point or not ref.dtype.is_floating_point or ref.numel() == 0:
        return False
    if torch.finfo(ref.dtype).eps >= torch.finfo(dtype).eps:
        return False
    r = ref.detach().double()
    return bool(torch.equal(r.to(dtype).double(), r))


def _tensors(value: Any, spec: ReferenceSpec) -> list[Any]:
    import torch

    items = list(value) if isinstance(value, tuple | list) else [value]
    if not items or not all(isinstance(i, torch.Tensor) for i in items):
        raise ConfigError(Problem(
            f"{spec.function}() returned {type(value).__name__}, not a tensor or a tuple of "
            "tensors", file=spec.path, line=spec.line,
            hint="return the output tensor(s); the evaluator compares tensors"))
    return items


def _reference_failure(exc: BaseException, root: Path, spec: ReferenceSpec, params: str
                       ) -> ConfigError:
    """Where in the reference's own lines it failed (the entry point copies them first)."""
    count = len(spec.path.read_text(encoding="utf-8").splitlines())
    line = spec.line
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        if path.parent == root and frame.lineno and (
                path.name == "reference.py" or frame.lineno <= count):
            line = frame.lineno
    return ConfigError(Problem(
        f"the reference raised {type(exc).__name__}: {exc} on drafted inputs ({params})",
        file=spec.path, line=line,
        hint=f"check its Shapes: section (each tensor's dims and dtype) against what the code "
             f"expects; see {GUIDE}"))


# --------------------------------------------------------------------------- task.yaml


def _task_fields(spec: ReferenceSpec, backend: str, family: str, entry: str, entry_file: str,
                 plan: Sizes, case_dtype: str | None, outputs: list[Output], notes: list[str]
                 ) -> tuple[dict[str, Any], dict[str, str]]:
    dtype_param = {"dtype": case_dtype} if case_dtype else {}
    fields: dict[str, Any] = {
        "format": "operator", "family": family, "backend": backend,
        "description": spec.summary or f"{entry}, drafted from {spec.path.name}",
        "editable": ["kernel.py"], "entrypoint": f"kernel.py:{entry}",
        "reference": f"reference.py:{spec.function}",
    }
    if entry_file != "kernel.py":
        fields["baseline"] = f"{entry_file}:{entry}"
    fields["inputs"] = "inputs.py:make_inputs"
    typical = {**plan.typical, **dtype_param}
    fields["cases"] = [{"name": case_name(plan.typical, case_dtype), "params": typical}]
    comments: dict[str, str] = {}
    if not spec.sizes and plan.typical:
        comments["cases"] = "default sizes: give realistic ones in the reference's Sizes: line"
    if any(isinstance(v, dict) for v in plan.draws.values()):
        fields["held_out_draws"] = {"count": 2, "params": {**plan.draws, **dtype_param}}
    else:
        notes.append("no held-out draws: every size is fixed (no symbol of 64 or more)")
    fields["smoke_case"] = {"name": "tiny", "params": {**plan.smoke, **dtype_param}}
    bytes_expr, partial = _bytes_expression(spec, outputs, case_dtype)
    fields["cost"] = {"bytes": bytes_expr, "flops": spec.flops or "0"}
    cost_notes = []
    if partial:
        cost_notes.append(partial)
    if not spec.flops:
        cost_notes.append("flops 0 is a safe lower bound: add a Flops: line to the reference")
    if cost_notes:
        comments["cost"] = "; ".join(cost_notes)
        notes.extend(cost_notes)
    fields["tolerance"] = _tolerances(outputs, case_dtype)
    if backend != "python":
        fields["requires"] = {"vendors": ["nvidia", "amd"]}
    fields["timeouts"] = dict(TIMEOUTS)
    if backend != "python":
        rules: dict[str, str] = {"torch_compute": "forbidden"}
        if any(o.dtype in ("bfloat16", "float16") for o in outputs):
            rules["compute_precision"] = "float32"
        fields["rules"] = rules
    fields["tags"] = ["drafted"]
    return fields, comments


def _bytes_expression(spec: ReferenceSpec, outputs: list[Output], case_dtype: str | None
                      ) -> tuple[str, str | None]:
    """Inputs read once and outputs written once; float inputs left out (with a note) where
    integer inputs index them, since a kernel may read only the rows they select."""
    def term(dims: tuple[str | int, ...], dtype: str | None) -> str:
        size = "bytes_of(dtype)" if dtype is None or dtype == case_dtype else str(
            DTYPE_BYTES[dtype])
        return " * ".join([*(str(d) for d in dims), size])

    indexed = any(t.bound is not None for t in spec.tensors)
    terms = [term(t.dims, t.dtype) for t in spec.tensors
             if not indexed or t.bound is not None]
    notes = []
    if indexed:
        notes.append("bytes count integer inputs and outputs only: what indexed reads need")
    untraced = [i for i, o in enumerate(outputs) if o.dims is None]
    terms += [term(o.dims, o.dtype) for o in outputs if o.dims is not None]
    if untraced:
        notes.append(f"output(s) {untraced} left out of bytes: their sizes follow no symbol")
    return " + ".join(terms) or "0", "; ".join(notes) or None


def _tolerances(outputs: list[Output], case_dtype: str | None) -> dict[str, dict[str, float]]:
    """The standard tolerance of each floating output dtype, atol at most 5% of the outputs'
    mean magnitude (so that zeros do not pass for small outputs); exact where the reference's
    values are all exactly of the output's dtype (a copy, a gather)."""
    dtypes = [o.dtype for o in outputs if o.dtype in TOLERANCES] or [case_dtype or "float32"]
    found: dict[str, dict[str, float]] = {}
    for dtype in dict.fromkeys(dtypes):
        same = [o for o in outputs if o.dtype == dtype]
        if same and all(o.exact for o in same):
            found[dtype] = {"rtol": 0.0, "atol": 0.0}
            continue
        tol = dict(TOLERANCES[dtype])
        magnitudes = [o.mean_abs for o in outputs if o.dtype == dtype and o.mean_abs > 0]
        if magnitudes:
            cap = 0.05 * min(magnitudes)
            if tol["atol"] > cap:
                tol["atol"] = _one_digit_below(cap)
        found[dtype] = tol
    return found


def _one_digit_below(value: float) -> float:
    exponent = math.floor(math.log10(value))
    return float(f"{math.floor(value / 10 ** exponent)}e{exponent}")


def _describe_outputs(spec: ReferenceSpec, outputs: list[Output]) -> str:
    from aka_core.authoring.task_templates import output_dtype_expr

    source = output_dtype_expr(spec)
    parts = []
    for out in outputs:
        shape = "[" + ", ".join(str(d) for d in out.dims) + "]" if out.dims is not None else \
            "a tensor shaped as the baseline's"
        if source.endswith(".dtype") and not spec.returns:
            kind = f"of {source.removesuffix('.dtype')}'s dtype"
        else:
            kind = out.dtype
        parts.append(f"{shape} {kind}")
    return ("a tuple: " if len(parts) > 1 else "") + ", ".join(parts)


def _instructions(spec: ReferenceSpec, backend: str, entry: str, case_dtype: str | None,
                  outputs: list[Output]) -> str:
    names = ", ".join(i.name for i in spec.inputs)
    what = spec.summary or f"the operation defined by {spec.function} in reference.py"
    lines = []
    if backend == "triton":
        lines += [f"Implement `{entry}({names})` in kernel.py with Triton; it currently raises",
                  "NotImplementedError. The baseline you are timed against is PyTorch eager",
                  "(baseline.py); reference.py defines a correct result."]
    else:
        lines += [f"Make `{entry}({names})` in kernel.py faster; reference.py defines a correct",
                  "result."]
    lines += ["", f"What it computes: {what}",
              f"Inputs: {describe_inputs(spec, case_dtype)}.",
              f"Returns: {_describe_outputs(spec, outputs)}.",
              "Any sizes must work: the evaluation also uses sizes you do not see, including odd",
              "ones. Do not modify the inputs. Keep the function name and signature."]
    if backend == "triton":
        lines += ["Keep the computation in Triton kernels: PyTorch may only allocate, reshape and",
                  "describe tensors (no torch or library calls for the math)."]
    return "\n".join(lines)


def _schema_reference(dest: Path) -> str:
    """The task schema for the modeline: relative inside the repository that holds it."""
    from aka_core.schema_validation import schemas_directory

    schema = (schemas_directory() / "task.schema.json").resolve()
    if dest.resolve().is_relative_to(schema.parent.parent):
        return os.path.relpath(schema, dest.resolve())
    return str(schema)


def _check_loads(dest: Path, task_id: str) -> None:
    from aka_core.builtin.operator_tasks import OperatorTaskFormat

    try:
        OperatorTaskFormat().load(dest, task_id)
    except AkaError as exc:
        raise AkaError(f"the drafted task in {dest} does not load (a bug in aka task new; "
                       f"please report it):\n{exc}") from None
