"""The prompt an agent gets for a task: instructions, files, target and rules."""

from __future__ import annotations

from aka_core.models import Task


def build_prompt(task: Task, target_gpu_model: str) -> str:
    editable = ", ".join(task.editable)
    cases = "\n".join(f"  - {c.name}: {c.params}" for c in task.cases)
    return f"""You are optimising a GPU kernel task: {task.id} ({task.family}, backend {task.backend}).

{task.instructions.strip()}

Files you may edit: {editable}
Entrypoint the evaluator calls: {task.entrypoint}
Target GPU: {target_gpu_model}
Visible cases (held-out cases with other shapes are evaluated too):
{cases}

Rules:
- Only the editable files count. Every other file in this folder (reference, inputs, task.yaml)
  is restored from the task before evaluation; changing them rejects the candidate.
- The evaluator checks correctness against the reference on fresh random inputs from a secret seed,
  on visible and held-out cases, and times your code against the baseline on the GPU.
- Hard-coded answers, shape-specific shortcuts that fail held-out cases, caching results across
  calls, and timing tricks score zero.
"""
