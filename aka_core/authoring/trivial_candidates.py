"""Trivial candidates: what a task must reject, written as real candidate files.

``aka validate --run`` evaluates each through the real evaluator (``task_quality``):

* ``zeros``: zeros of the baseline's output shapes and dtypes: must fail correctness;
* ``first_input``: the first tensor input, reshaped and cast to the output where sizes allow:
  must fail correctness;
* ``calls_reference``: imports the task's reference and returns its outputs in the output dtype;
* ``torch_ops_inline``: the reference's PyTorch code pasted into the candidate's file.

The last two compute with PyTorch: a task whose rules forbid that must reject them.

A candidate knows the output structure of each case by its inputs' shapes and dtypes (the
probe's ``key``): the zeros and the input must at least have the right shape to be compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aka_core.models import Task

WRONG_OUTPUT = ("zeros", "first_input")
TORCH_COMPUTE = ("calls_reference", "torch_ops_inline")
DESCRIPTIONS = {
    "zeros": "returns zeros of the output's shape and dtype",
    "first_input": "returns its first tensor input (reshaped and cast to the output)",
    "calls_reference": "calls the task's reference and casts its outputs",
    "torch_ops_inline": "computes with the reference's PyTorch code pasted into the kernel file",
}

_PRELUDE = '''"""A trivial candidate of `aka validate --run`: it {description}."""

import math

import torch

# The baseline's outputs, by the inputs' shapes and dtypes (measured by the task probe).
_OUTPUTS = {outputs}
_SINGLE = {single}


def _structure(kwargs):
    key = "|".join(f"{{tuple(v.shape)}}:{{v.dtype}}" for v in kwargs.values()
                   if isinstance(v, torch.Tensor))
    return _OUTPUTS[key]


def _first_tensor(kwargs):
    for value in kwargs.values():
        if isinstance(value, torch.Tensor):
            return value
    raise TypeError("no tensor input")


def _result(outs):
    return outs[0] if _SINGLE else tuple(outs)
'''

_BODIES = {
    "zeros": '''

def {entry}(**kwargs):
    device = _first_tensor(kwargs).device
    return _result([torch.zeros(shape, dtype=dtype, device=device)
                    for shape, dtype in _structure(kwargs)])
''',
    "first_input": '''

def {entry}(**kwargs):
    x = _first_tensor(kwargs)
    outs = []
    for shape, dtype in _structure(kwargs):
        fits = math.prod(shape) == math.prod(x.shape)
        outs.append(x.reshape(shape).to(dtype=dtype, copy=True) if fits else x)
    return _result(outs)
''',
    "calls_reference": '''

def {entry}(**kwargs):
    refs = _reference(**kwargs)
    refs = list(refs) if isinstance(refs, tuple | list) else [refs]
    return _result([r.to(dtype) for r, (shape, dtype) in zip(refs, _structure(kwargs))])
''',
}
_BODIES["torch_ops_inline"] = _BODIES["calls_reference"]


def candidate_source(kind: str, task: Task, cases: Sequence[Mapping[str, Any]]) -> str:
    """The entrypoint file of trivial candidate ``kind`` for ``task``; ``cases``: the probe's."""
    entry_file, _, entry = task.entrypoint.partition(":")
    outputs = "{" + ", ".join(
        f"{case['key']!r}: [" + ", ".join(
            f"({tuple(o['shape'])!r}, torch.{o['dtype']})" for o in case["outputs"]) + "]"
        for case in cases) + "}"
    single = all(case["single"] for case in cases)
    text = _PRELUDE.format(description=DESCRIPTIONS[kind], outputs=outputs, single=single)
    ref_file, _, ref_fn = task.reference.partition(":")
    if kind == "calls_reference":
        text += f"\nfrom {_relative_module(entry_file, ref_file)} import {ref_fn} as _reference\n"
    elif kind == "torch_ops_inline":
        pasted = (task.root / ref_file).read_text(encoding="utf-8")
        # The reference's own text first (a __future__ import must stay first), then ours.
        text = f"{pasted.rstrip()}\n\n_reference = {ref_fn}\n\n\n" + text.replace(
            "import math\n\nimport torch\n", "import math  # noqa: E402\n\nimport torch  # noqa: E402\n")
    return text + _BODIES[kind].format(entry=entry)


def _relative_module(entry_file: str, target_file: str) -> str:
    """``target_file`` as a relative import from ``entry_file`` (both relative to the task)."""
    depth = len(Path(entry_file).parent.parts)
    return "." * (depth + 1) + ".".join(Path(target_file).with_suffix("").parts)


def write_candidate(kind: str, task: Task, cases: Sequence[Mapping[str, Any]], dest: Path) -> Path:
    """A candidate folder for ``kind`` under ``dest``, holding the entrypoint file."""
    entry_file = task.entrypoint.partition(":")[0]
    folder = dest / kind
    path = folder / entry_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(candidate_source(kind, task, cases), encoding="utf-8")
    return folder
