"""The files ``aka task new`` writes: inputs.py, the PyTorch entry point, the Triton stub, task.yaml.

Each function returns a file's text; ``task_builder`` decides which to write where.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from aka_core.authoring.task_spec import FLOAT_DTYPES, ReferenceSpec, ScalarSpec, TensorSpec

_ANNOTATION = {bool: "bool", int: "int", float: "float"}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*")
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})


def _dims_text(dims: Sequence[str | int]) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _dtype_expr(tensor: TensorSpec) -> str:
    return "dtype" if tensor.dtype is None else f"torch.{tensor.dtype}"


def render_inputs(spec: ReferenceSpec, task_id: str) -> str:
    symbols = spec.symbols
    lines = [
        f'"""Inputs for {task_id}: drafted by `aka task new` from {spec.path.name}.',
        "",
        "Random values from the case's seed: standard-normal floats, integers below their bound.",
        'Replace them with the ranges the operation meets in practice."""',
        "",
        "import torch",
        "",
        "",
        "def make_inputs(case: dict, seed: int, device: str) -> dict:",
    ]
    if any(t.dtype is None for t in spec.tensors):
        lines.append('    dtype = getattr(torch, case.get("dtype", "bfloat16"))')
    for s in symbols:
        lines.append(f'    {s} = int(case["{s}"])')
    lines.append("    g = torch.Generator(device=device).manual_seed(seed)")
    out = []
    for item in spec.inputs:
        if isinstance(item, ScalarSpec):
            out.append(f'"{item.name}": {item.value!r}')
            continue
        shape = _dims_text(item.dims)
        if item.dtype is not None and item.dtype == "bool":
            lines.append(f"    {item.name} = torch.rand({shape}, generator=g, device=device) < 0.5")
        elif item.bound is not None:
            lines.append(f"    {item.name} = torch.randint(0, {item.bound}, {shape}, generator=g, "
                         f"device=device, dtype=torch.{item.dtype})")
        else:
            lines.append(f"    {item.name} = torch.randn({shape}, generator=g, device=device, "
                         f"dtype=torch.float32).to({_dtype_expr(item)})")
        out.append(f'"{item.name}": {item.name}')
    lines.append("    return {" + ", ".join(out) + "}")
    return "\n".join(lines) + "\n"


def signature(spec: ReferenceSpec) -> str:
    parts = []
    for item in spec.inputs:
        kind = "torch.Tensor" if isinstance(item, TensorSpec) else _ANNOTATION[type(item.value)]
        parts.append(f"{item.name}: {kind}")
    return ", ".join(parts)


def output_dtype_expr(spec: ReferenceSpec) -> str:
    """The entry point's output dtype: Returns:, else the first floating tensor input's."""
    if spec.returns:
        return f"torch.{spec.returns}"
    for tensor in spec.tensors:
        if tensor.dtype is None or tensor.dtype in FLOAT_DTYPES:
            return f"{tensor.name}.dtype"
    return "None"


def render_torch_entry(spec: ReferenceSpec, entry: str, source: str) -> str:
    """The reference's source, then ``entry``: its math with outputs in the task's dtype."""
    names = ", ".join(i.name for i in spec.inputs)
    return f'''{source.rstrip()}


# --------------------------------------------------------------------------- the entry point
# Drafted by `aka task new`: the reference's math above, in plain PyTorch, with floating-point
# outputs in the task's dtype.

import torch  # noqa: E402

_reference_math = {spec.function}


def {entry}({signature(spec)}):
    """{spec.summary or entry}"""
    return _in_task_dtype(_reference_math({names}), {output_dtype_expr(spec)})


def _in_task_dtype(out, dtype):
    """Floating-point outputs in ``dtype``; integer and boolean ones as they are."""
    if isinstance(out, tuple | list):
        return tuple(_in_task_dtype(o, dtype) for o in out)
    if dtype is None or not out.is_floating_point():
        return out
    return out.to(dtype)
'''


def render_triton_stub(spec: ReferenceSpec, entry: str, inputs_text: str, output_text: str) -> str:
    return f'''"""{entry} in Triton: to be written (drafted by `aka task new`)."""

import torch


def {entry}({signature(spec)}):
    """{spec.summary or entry}

    Inputs: {inputs_text}.
    Returns: {output_text}.
    """
    raise NotImplementedError("implement {entry} with a Triton kernel")
'''


def describe_inputs(spec: ReferenceSpec, dtype: str | None) -> str:
    parts = []
    for item in spec.inputs:
        if isinstance(item, ScalarSpec):
            parts.append(f"{item.name} = {item.value!r}")
            continue
        dims = "[" + ", ".join(str(d) for d in item.dims) + "]"
        kind = item.dtype or dtype or "float"
        bound = f" with values in [0, {item.bound})" if item.bound is not None else ""
        parts.append(f"{item.name} {dims} {kind}{bound}")
    return ", ".join(parts)


def yaml_value(value: Any) -> str:
    """A scalar, list or mapping in YAML flow style (JSON strings are YAML strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS
        return value if plain else json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as YAML")


def render_task_yaml(fields: Mapping[str, Any], comments: Mapping[str, str], schema: str,
                     instructions: str) -> str:
    """``fields`` in order, one flow-style line each (``cases`` one line per case), then the
    instructions as a literal block; ``comments`` end the line of their field."""
    lines = [f"# yaml-language-server: $schema={schema}"]
    for key, value in fields.items():
        note = f"  # {comments[key]}" if key in comments else ""
        if key == "cases":
            lines.append(f"cases:{note}")
            lines += [f"  - {yaml_value(case)}" for case in value]
        elif key == "held_out_draws":
            lines.append(f"held_out_draws:{note}")
            lines.append(f"  count: {value['count']}")
            lines.append("  params:")
            lines += [f"    {k}: {yaml_value(v)}" for k, v in value["params"].items()]
        elif key == "tolerance":
            lines.append(f"tolerance:{note}")
            lines += [f"  {k}: {yaml_value(v)}" for k, v in value.items()]
        else:
            lines.append(f"{key}: {yaml_value(value)}{note}")
    lines.append("instructions: |")
    lines += [f"  {line}".rstrip() for line in instructions.strip().splitlines()]
    return "\n".join(lines) + "\n"
