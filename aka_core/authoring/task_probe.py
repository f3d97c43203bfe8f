"""The facts ``aka validate --run`` needs about a task's own code, measured in a subprocess.

``python -m aka_core.authoring.task_probe`` reads a request (JSON on stdin: the task folder, its reference,
inputs and baseline, the backend, the device, the cases and the tolerances) and writes, as the
last line of stdout, for each case: the baseline's output structure (what a trivial candidate
must return to be compared at all) and the tolerance calibration (how far the reference is from
itself, measured in units of the task's tolerance). The parent (``run_probe``) gives it the
backend's worker environment (Triton's interpreter on a CPU) and kills it at the task's own time
limits: a hanging reference or baseline cannot hang the validation.

Only the task author's code runs here (reference, inputs factory, baseline), never a candidate's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aka_core.errors import AkaError
from aka_core.models import Task
from aka_core.plugin.host import PluginHost


class ProbeError(AkaError):
    """The probe failed or ran past its time limit; the message says which and why."""


def probe_request(task: Task, device: str, cases: list[Any]) -> dict[str, Any]:
    return {
        "root": str(task.root.resolve()), "reference": task.reference, "inputs": task.inputs,
        "baseline": task.baseline, "backend": task.backend, "backend_factory": None,
        "device": device,
        "cases": [{"name": c.name, "params": dict(c.params)} for c in cases],
        "tolerance": {k: {"rtol": v.rtol, "atol": v.atol} for k, v in task.tolerance.items()},
    }


def run_probe(task: Task, host: PluginHost, device: str, cases: list[Any]) -> dict[str, Any]:
    """The probe's answer; ``ProbeError`` when it fails or outlives the task's compile and
    correctness limits together."""
    from aka_core.run.lifecycle import worker_env

    limit = task.timeouts.compile_seconds + task.timeouts.correctness_seconds
    env = {**os.environ, **worker_env(host, task.backend, device)}
    request = probe_request(task, device, cases)
    factory = host.backend(task.backend).factory
    if isinstance(factory, type):  # the probe imports the backend alone, not every plugin
        request["backend_factory"] = f"{factory.__module__}:{factory.__qualname__}"
    proc = subprocess.Popen([sys.executable, "-m", "aka_core.authoring.task_probe"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(json.dumps(request), timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise ProbeError(f"the reference and baseline did not finish within the task's compile "
                         f"and correctness limits ({limit:g} s)") from None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise ProbeError(f"the probe of the task's code failed (exit {proc.returncode}): "
                         f"{err.strip()[-1500:] or 'no output'}")
    answer: dict[str, Any] = json.loads(lines[-1])
    if "error" in answer:
        raise ProbeError(f"{answer['error']}\n{answer.get('traceback', '')}".strip())
    return answer


# --------------------------------------------------------------------------- the subprocess


def input_key(inputs: Mapping[str, Any]) -> str:
    """The tensor inputs' shapes and dtypes: how a trivial candidate recognises a case (its
    source computes the same string)."""
    import torch

    return "|".join(f"{tuple(v.shape)}:{v.dtype}" for v in inputs.values()
                    if isinstance(v, torch.Tensor))


def _scale(out: Any, ref: Any, rtol: float, atol: float) -> float:
    """max |out - ref| / (atol + rtol |ref|) over elements finite in both: how much of the
    tolerance the difference uses (1.0: exactly all of it)."""
    import torch

    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    finite = torch.isfinite(o) & torch.isfinite(r)
    if not bool(finite.any()):
        return 0.0
    diff, bound = (o - r).abs()[finite], (atol + rtol * r.abs())[finite]
    exceeded = diff > 0
    if bool((bound[exceeded] == 0).any()):
        return float("inf")
    ratio = torch.where(bound > 0, diff / bound.clamp_min(1e-300), torch.zeros_like(diff))
    return float(ratio.max())


def _rounding_scale(ref: Any, dtype: Any, rtol: float, atol: float) -> float:
    """The difference two correct outputs in ``dtype`` may have: each rounded once, they differ by
    up to one unit in the last place (or by the reference's own rounding, where that is more).
    Where a reference finer than ``dtype`` is exactly representable in it (a copy, a gather, a
    maximum), the correct output is that value: no difference."""
    import torch

    r = ref.detach().double().cpu()
    rounded = (r.to(dtype).double() - r).abs()
    one_ulp = torch.finfo(dtype).eps * r.abs()
    floor = torch.maximum(rounded, one_ulp)
    finer = not ref.dtype.is_floating_point or torch.finfo(ref.dtype).eps < torch.finfo(dtype).eps
    if finer:
        floor = torch.where(rounded == 0, torch.zeros_like(floor), floor)
    return _scale(r + floor, r, rtol, atol)


def _calibrate(case: Mapping[str, Any], request: Mapping[str, Any], fns: Mapping[str, Any]
               ) -> dict[str, Any]:
    import torch

    from aka_core.evaluation.checking import as_tensors, tolerance_for
    from aka_core.models import Tolerance

    device, params = request["device"], case["params"]
    tolerances = {k: Tolerance(**v) for k, v in request["tolerance"].items()}
    inputs = fns["inputs"](params, 0, device)
    key = input_key(inputs)
    with torch.no_grad():
        ref = as_tensors(fns["reference"](**inputs))
        again = as_tensors(fns["reference"](**fns["inputs"](params, 0, device)))
        raw = fns["baseline"](**fns["inputs"](params, 0, device))
        base = as_tensors(raw)
        out_dtype = base[0].dtype
        cast = {k: v.to(out_dtype) if isinstance(v, torch.Tensor) and v.is_floating_point()
                and out_dtype.is_floating_point else v for k, v in inputs.items()}
        from_cast = as_tensors(fns["reference"](**cast))
    scales = {"rerun": 0.0, "cast_inputs": 0.0, "rounding": 0.0, "baseline": 0.0}
    dtypes = []
    for index, (r, b) in enumerate(zip(ref, base, strict=False)):
        if not b.dtype.is_floating_point:
            continue  # integer and boolean outputs compare exactly
        tol = tolerance_for(b.dtype, tolerances)
        dtypes.append(str(b.dtype).removeprefix("torch."))
        for name, other in (("rerun", again), ("cast_inputs", from_cast)):
            if index < len(other) and other[index].shape == r.shape:
                scales[name] = max(scales[name], _scale(other[index], r, tol.rtol, tol.atol))
        scales["rounding"] = max(scales["rounding"], _rounding_scale(r, b.dtype, tol.rtol,
                                                                     tol.atol))
        if b.shape == r.shape:
            scales["baseline"] = max(scales["baseline"], _scale(b, r, tol.rtol, tol.atol))
    return {
        "case": case["name"], "key": key, "single": not isinstance(raw, tuple | list),
        "outputs": [{"shape": list(b.shape), "dtype": str(b.dtype).removeprefix("torch.")}
                    for b in base],
        "float_dtypes": dtypes, "scales": scales,
    }


def _backend(request: Mapping[str, Any]) -> Any:
    import importlib

    if request.get("backend_factory"):
        module, _, name = request["backend_factory"].partition(":")
        factory = importlib.import_module(module)
        for part in name.split("."):
            factory = getattr(factory, part)
        return factory()
    return PluginHost().backend(request["backend"]).factory()


def main() -> int:
    import traceback

    request = json.loads(sys.stdin.read())
    try:
        from aka_core.kits.python_backend import PythonBackend

        root = Path(request["root"])
        plain = PythonBackend()
        backend = _backend(request)
        fns = {"inputs": plain.load_callable(root, request["inputs"], "aka_probe_inputs"),
               "reference": plain.load_callable(root, request["reference"], "aka_probe_reference"),
               "baseline": backend.load_callable(root, request["baseline"], "aka_probe_baseline")}
        cases = [_calibrate(case, request, fns) for case in request["cases"]]
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()[-3000:]}))
        return 0
    print(json.dumps({"cases": cases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
