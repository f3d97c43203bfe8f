"""The files aka adds beside a problem to make it a task: inputs, reference, baseline, entry.

``_aka_task.py`` (the evaluator's side) and ``_aka_entry.py`` (the candidate's) are protected
files: an agent may only edit ``model_new.py``. Both models of a call are built the same way, once
per size and device: the problem's constants set to the case's, ``torch.manual_seed(INIT_SEED)``,
``cls(*get_init_inputs())`` on the inputs' device, so a ``ModelNew`` that creates the same
parameters in the same order (KernelBench's convention) gets the same weights.
"""

from __future__ import annotations

TASK = '''\
"""Made by aka's kernelbench task format from problem.py (do not edit: restored if changed).

Inputs come from the problem's get_inputs() under aka's seed, on the evaluation's device; the
reference and the baseline are the problem's Model; sizes are the problem's module constants,
set per case (held-out cases draw batch_size)."""

import contextlib

import torch

from . import problem

INIT_SEED = 42
CONSTANTS = {constants!r}
_models = {{}}


def _configure(params):
    for name, value in params.items():
        if name in CONSTANTS:
            setattr(problem, name, int(value))


@contextlib.contextmanager
def _seeded(seed, device):
    """Tensors made on ``device`` from ``seed``; the caller's random state is left as it was."""
    cuda = str(device).startswith("cuda")
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if cuda else []), \
            torch.device(device):
        torch.manual_seed(seed)
        yield


def make_inputs(case, seed, device):
    params = {{k: int(v) for k, v in case.items() if k in CONSTANTS}}
    _configure(params)
    with _seeded(seed, device):
        values = problem.get_inputs()
    inputs = {{f"kb_{{k}}": v for k, v in params.items()}}
    for i, value in enumerate(values):
        inputs[f"x{{i}}"] = value.to(device) if isinstance(value, torch.Tensor) else value
    return inputs


def _model(cls, params, device):
    key = (cls, tuple(sorted(params.items())), str(device))
    if key not in _models:
        _configure(params)
        with _seeded(INIT_SEED, device):
            _models[key] = cls(*problem.get_init_inputs()).to(device).eval()
    return _models[key]


def call(cls, inputs):
    params = {{k[3:]: v for k, v in inputs.items() if k.startswith("kb_")}}
    args = [inputs[f"x{{i}}"] for i in range(sum(1 for k in inputs if k.startswith("x")))]
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    with torch.no_grad():
        return _model(cls, params, device)(*args)


def reference(**inputs):
    return call(problem.Model, inputs)


def baseline(**inputs):
    return call(problem.Model, inputs)
'''

ENTRY = '''\
"""Made by aka's kernelbench task format (do not edit: restored if changed): calls model_new's
ModelNew, built like the problem's Model (same constructor arguments, same seed)."""

from . import _aka_task, model_new


def candidate(**inputs):
    return _aka_task.call(model_new.ModelNew, inputs)
'''

MODEL_NEW = '''\
"""Write ModelNew: it must compute what problem.Model computes, faster.

ModelNew takes the same constructor arguments as Model (problem.get_init_inputs()) and the same
forward arguments (problem.get_inputs()); both are built after the same torch.manual_seed, so
parameters created in the same order get the same values. Custom kernels (Triton, CUDA through
torch.utils.cpp_extension.load_inline, ...) go in this file.
"""

from .problem import Model


class ModelNew(Model):
    pass
'''

INSTRUCTIONS = """\
This is a KernelBench-style problem: problem.py defines class Model (the computation to speed
up), get_inputs() and get_init_inputs(). Edit model_new.py only: define class ModelNew with the
same constructor and forward arguments as Model, producing the same outputs (within rtol/atol
1e-2), faster on the GPU. Sizes are the module constants of problem.py{held_out}."""
