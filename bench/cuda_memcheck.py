"""Every CUDA task's baseline and stored solution on its smoke and held-out shapes, compared with
the reference, for running under ``compute-sanitizer --tool memcheck`` (out-of-bounds accesses in
the odd-size paths show up there even when the values happen to match).

Usage:  compute-sanitizer --tool memcheck --error-exitcode 9 python bench/cuda_memcheck.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from aka_core.builtin.operator_tasks import load_task
from aka_core.plugin.host import PluginHost

ROOT = Path(__file__).resolve().parents[1]


def load_fn(folder: Path, ref: str, name: str):
    file, _, fn = ref.partition(":")
    spec = importlib.util.spec_from_file_location(name, folder / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, fn)


def main() -> int:
    host, failures = PluginHost(), 0
    for path in sorted((ROOT / "tasks").rglob("task.yaml")):
        task_id = path.parent.relative_to(ROOT / "tasks").as_posix()
        task = load_task(path.parent, task_id, host)
        if task.backend != "cuda":
            continue
        make = load_fn(task.root, task.inputs, f"inputs_{task.name}")
        ref = load_fn(task.root, task.reference, f"ref_{task.name}")
        sides = {"baseline": load_fn(task.root, task.baseline, f"base_{task.name}"),
                 "solution": load_fn(ROOT / "tests/solutions" / task_id, task.entrypoint,
                                     f"sol_{task.name}")}
        for case in [task.smoke_case, *task.held_out_cases]:
            params = dict(case.params)  # held-out shapes with fewer rows: memcheck is slow
            params.update({k: min(int(v), 67) for k, v in params.items() if k in ("M", "B")})
            inputs = make(params, 1234, "cuda")
            expected = ref(**inputs)
            expected = expected if isinstance(expected, tuple) else (expected,)
            for side, fn in sides.items():
                got = fn(**inputs)
                got = got if isinstance(got, tuple) else (got,)
                torch.cuda.synchronize()
                err = max(float((g.float() - e.float()).abs().max() / (1 + e.float().abs().max()))
                          for g, e in zip(got, expected, strict=True))
                print(f"{task_id} {side} {case.name}: max err / (1 + max |ref|) {err:.4g}",
                      flush=True)
                failures += err > 0.02
    print("FAILURES" if failures else "all matched", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
