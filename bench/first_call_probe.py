"""What a candidate's first call on a new shape costs, with and without the operator recorder.

In one process (no judge, no sandbox): load a task's stored solution through its backend, then for
each case (the visible ones and held-out draws) time, with a GPU sync, the first call on that
shape without the recorder, then a call with it, then a plain call again; and the same with the
recorder on the first call of further fresh draws.

Usage:  python bench/first_call_probe.py task_id [task_id ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(fn, inputs, recorder=None) -> float:  # type: ignore[no-untyped-def]
    import torch

    torch.cuda.synchronize()
    started = time.perf_counter()
    if recorder is None:
        fn(**inputs)
    else:
        with recorder:
            fn(**inputs)
    torch.cuda.synchronize()
    return time.perf_counter() - started


def recorder_first_use() -> None:
    """The recorder's one-time cost in a fresh process (it imported torch._dynamo before it
    opted out of Dynamo's wrapping)."""
    import subprocess

    code = ("import sys, time, torch\n"
            "from aka_core.evaluation.runner import _OpRecorder\n"
            "x = torch.randn(8, device='cuda'); torch.cuda.synchronize()\n"
            "t = time.perf_counter()\n"
            "with _OpRecorder(set()):\n    torch.empty_like(x).copy_(x)\n"
            "print(f'recorder first use {time.perf_counter() - t:.3f} s, torch._dynamo imported: '"
            "f'{\"torch._dynamo\" in sys.modules}, torch {torch.__version__}')\n")
    print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout,
          end="")


def probe(task_id: str, index: int) -> None:
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.evaluation.judge import draw_held_out
    from aka_core.evaluation.runner import _OpRecorder
    from aka_core.kits.python_backend import PythonBackend
    from aka_core.plugin.host import PluginHost

    host = PluginHost()
    task = load_task(ROOT / "tasks" / task_id, task_id, host)
    backend = host.backend(task.backend).factory()
    started = time.perf_counter()
    fn = backend.load_callable(ROOT / "tests" / "solutions" / task_id, task.entrypoint,
                               f"aka_probe_side{index}")
    print(f"## {task_id}: load {time.perf_counter() - started:.3f} s")
    make = PythonBackend().load_callable(task.root, task.inputs, f"aka_probe_task{index}")
    cases = list(task.cases)
    if task.held_out_draws:
        cases += draw_held_out(task.held_out_draws, 1)
    for case in cases:
        inputs = make(dict(case.params), 1, "cuda")
        first = timed(fn, inputs)
        ops: set[str] = set()
        rec = timed(fn, inputs, _OpRecorder(ops))
        plain = timed(fn, inputs)
        print(f"{case.name} {dict(case.params)}: first {first:.3f} s, recorded {rec:.3f} s, "
              f"plain {plain:.4f} s, ops {sorted(ops)}")
    if task.held_out_draws:
        for case in draw_held_out(task.held_out_draws, 2):
            inputs = make(dict(case.params), 1, "cuda")
            rec = timed(fn, inputs, _OpRecorder(set()))
            plain = timed(fn, inputs)
            print(f"fresh {dict(case.params)}: recorded first {rec:.3f} s, plain {plain:.4f} s")


if __name__ == "__main__":
    recorder_first_use()
    for index, task_id in enumerate(sys.argv[1:]):
        probe(task_id, index)
