"""The prompt an agent gets for a task: instructions, files, target, rules and how to check work."""

from __future__ import annotations

from aka_core.gpus import GpuModel
from aka_core.models import Task


def _target_line(target: GpuModel | None) -> str:
    if target is None:
        return "the GPU of the host that evaluates (no model named)"
    if target.is_cpu:
        return "none (CPU only: correctness runs through the interpreter; nothing is timed)"
    parts = [p for p in (target.vendor, target.architecture,
                         f"compute capability {target.compute_capability}"
                         if target.compute_capability else None) if p]
    return f"{target.name} ({', '.join(parts)})"


def build_prompt(task: Task, target: GpuModel | None) -> str:
    if task.judging is not None:
        return _judged_prompt(task, target)
    editable = ", ".join(task.editable)
    cases = "\n".join(f"  - {c.name}: {c.params}" for c in task.cases)
    return f"""You are optimising a GPU kernel task: {task.id} ({task.family}, backend {task.backend}).

{task.instructions.strip()}

Files you may edit: {editable}
Entrypoint the evaluator calls: {task.entrypoint} (with the keyword arguments the task's inputs
factory builds; see {task.inputs.split(":")[0]})
Target GPU: {_target_line(target)}
Visible cases (held-out cases with other shapes are evaluated too):
{cases}

Rules:
- Only the editable files count. Every other file in this folder (reference, inputs, task.yaml)
  is restored from the task before evaluation; changing them, or the task's own files outside
  this folder, rejects the candidate.
- The evaluator checks correctness against the reference on fresh random inputs from a secret seed,
  on visible and held-out cases, and times your code against the baseline on the GPU.
- Hard-coded answers, shape-specific shortcuts that fail held-out cases, caching results across
  calls, and timing tricks score zero.

Checking your work: run `aka selfcheck` in this folder. It builds your code, checks it on the
visible cases and times it briefly against the baseline. It is advisory: the final evaluation is
independent, uses other random inputs and also runs the held-out cases.
"""


def _judged_prompt(task: Task, target: GpuModel | None) -> str:
    """The prompt of a task whose format judges it (``Task.judging`` says how)."""
    assert task.judging is not None
    cases = "\n".join(f"  - {c.name}: {c.params}" for c in task.cases)
    return f"""You are optimising a GPU kernel task: {task.id} ({task.family}, backend {task.backend}).

{task.instructions.strip()}

Files you may edit: {", ".join(task.editable)}
Target GPU: {_target_line(target)}
Cases:
{cases}

{task.judging.strip()}
"""
