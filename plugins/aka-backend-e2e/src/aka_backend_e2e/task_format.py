"""The ``e2e`` task format: a folder with ``workload.yaml`` (and no ``task.yaml``).

An e2e task folder holds ``workload.yaml`` (what is served and measured), ``workload.lock`` (its
pinned digests), the kernel tree ``kernels/`` (the baseline: plain PyTorch) and
``instructions.md`` (what the agent is told). The editable files are the tree's modules that define
the entrypoints the workload names; every other file is the evaluator's and is restored before
the evaluation. Loading checks the workload against its JSON Schema and the files against the
lock; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from aka_backend_e2e.workload import (
    LOCK_FILE,
    MODULE_OF,
    WORKLOAD_FILE,
    Workload,
    check_lock,
    load_workload,
)
from aka_core.plugin import TASK_FILE, Case, ConfigError, Problem, Requirements, Task, Timeouts

INSTRUCTIONS_FILE = "instructions.md"
CPU_CONFIGS = ("tiny",)
"""Builtin configs served on the CPU too (tests); every other model needs a GPU."""

SIGNATURES: dict[str, str] = {
    "rms_norm": "rms_norm(x[T,H], weight[H], eps: float) -> [T,H]",
    "fused_add_rms_norm": "fused_add_rms_norm(x[T,H], residual[T,H], weight[H], eps) -> "
                          "(normed[T,H], residual_out[T,H]) with residual_out = x + residual",
    "silu_and_mul": "silu_and_mul(x[T,2I]) -> [T,I] = silu(x[:, :I]) * x[:, I:]",
    "rotary": "rotary(q[T,Hq,D], k[T,Hk,D], positions[T] int64, cos_sin[Lmax,D] fp32) -> "
              "(q_out, k_out), NeoX style: cos_sin[:, :D/2] = cos, cos_sin[:, D/2:] = sin",
    "attention_prefill": "attention_prefill(q[T,Hq,D], k[T,Hk,D], v[T,Hk,D], scale) -> "
                         "[T,Hq,D], causal, one sequence, GQA",
    "attention_decode": "attention_decode(q[B,Hq,D], k_cache[B,L,Hk,D], v_cache[B,L,Hk,D], "
                        "seq_lens[B] int32, scale) -> [B,Hq,D], attends to positions < seq_lens",
    "kv_write": "kv_write(k[T,Hk,D], v[T,Hk,D], k_cache[S,L,Hk,D], v_cache[S,L,Hk,D], "
                "slots[T] int64, positions[T] int64) -> None: cache[slots, positions] = k/v",
}

JUDGING = """\
How it is judged (the judge runs outside this folder; nothing here can change it):
- Only the editable files count. Every other file in this folder (workload.yaml, workload.lock,
  the other kernel modules, instructions.md) is restored from the task before evaluation;
  changing them, or the task's own files outside this folder, rejects the candidate.
- Correctness: each replaced entrypoint is compared with an FP32 reference on the judge's own
  inputs, and the model served with your kernels generates greedy sequences that an FP32 reference
  model with the same weights scores, token by token: their regret must stay within the
  workload's bound (and within twice the baseline's own). The prompts come from a secret seed.
- Speed: a fresh server per run serves the fixed work of each case (same prompts and lengths,
  ignore_eos) with the baseline kernels and with yours, in alternating pairs; the judge counts
  the tokens and times the server with its own clock. The speedup is the geometric mean over
  cases of the median paired throughput ratio; a p99 time-per-output-token limit is a gate where
  the workload sets one.
- Every entrypoint must keep its signature, be pure (kv_write writes the cache in place), run on
  the engine's device and be capturable in a CUDA graph: no host syncs, no .item(), no
  data-dependent shapes. Caching results across calls or detecting the judge scores zero.

Checking your work: `aka selfcheck` in this folder runs the same judge briefly (advisory: it
starts the server several times, so it takes minutes on a GPU).
"""


class E2ETaskFormat:
    """Finds folders with a ``workload.yaml`` (and no ``task.yaml``) and loads them."""

    def is_task_dir(self, path: Path) -> bool:
        return (path.is_dir() and (path / WORKLOAD_FILE).is_file()
                and not (path / TASK_FILE).exists())

    def load(self, task_dir: Path, task_id: str) -> Task:
        workload = load_workload(task_dir / WORKLOAD_FILE)
        check_tree(task_dir, workload)
        check_lock(task_dir, workload)
        return task_of(task_dir, task_id, workload)


def check_tree(task_dir: Path, workload: Workload) -> None:
    """The kernel tree exists and every module defines the entrypoints the contract puts there
    (parsed, not imported)."""
    file = task_dir / WORKLOAD_FILE
    tree = task_dir / workload.kernels.tree
    if not tree.is_dir():
        raise ConfigError(Problem(f"the kernel tree {workload.kernels.tree}/ is missing",
                                  file=file, field="kernels.tree",
                                  hint="copy the baseline tree (aka_backend_e2e/baseline_kernels)"))
    problems: list[Problem] = []
    for module in sorted(set(MODULE_OF.values())):
        path = tree / module
        wanted = sorted(name for name, mod in MODULE_OF.items() if mod == module)
        if not path.is_file():
            problems.append(Problem(f"{workload.kernels.tree}/{module} is missing (it defines "
                                    f"{', '.join(wanted)})", file=file, field="kernels.tree"))
            continue
        try:
            parsed = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            problems.append(Problem(f"syntax error: {exc.msg}", file=path, line=exc.lineno))
            continue
        defined = {node.name for node in parsed.body
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        defined |= {alias.asname or alias.name for node in parsed.body
                    if isinstance(node, ast.ImportFrom) for alias in node.names}
        defined |= {t.id for node in parsed.body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
        for name in wanted:
            if name not in defined:
                problems.append(Problem(f"defines no {name}() at module level", file=path,
                                        hint=f"the contract: {SIGNATURES[name]}"))
    if problems:
        raise ConfigError(problems)


def task_of(task_dir: Path, task_id: str, workload: Workload) -> Task:
    editable = workload.editable
    first = workload.kernels.entrypoints[0]
    entry = f"{workload.kernels.tree}/{MODULE_OF[first]}:{first}"
    cpu = workload.engine == "builtin" and workload.model.config in CPU_CONFIGS
    cases = tuple(Case(name=c.name, params={
        "input_len": list(c.input_len), "output_len": list(c.output_len),
        "requests": c.requests, "max_concurrency": c.max_concurrency,
        "request_rate": "inf" if c.request_rate == float("inf") else c.request_rate})
        for c in workload.cases)
    description = (f"serve {workload.model_label} with the {workload.engine} engine; replace "
                   f"{', '.join(workload.kernels.entrypoints)}")
    return Task(
        id=task_id, root=task_dir.resolve(), format="e2e", name=task_dir.name, backend="e2e",
        family="e2e", editable=editable, entrypoint=entry,
        reference=f"{WORKLOAD_FILE}:correctness", baseline=entry,
        inputs=f"{WORKLOAD_FILE}:cases", cases=cases,
        instructions=instructions(task_dir, workload), tolerance={},
        description=description,
        requires=Requirements(vendors=() if workload.engine == "builtin" else ("nvidia",),
                              cpu_interpreter=cpu),
        timeouts=Timeouts(compile_seconds=600.0, correctness_seconds=900.0,
                          timing_seconds=workload.measurement.max_seconds),
        tags=("e2e", workload.engine), judging=JUDGING, validated_on=workload.validated_on)


def instructions(task_dir: Path, workload: Workload) -> str:
    """``instructions.md``, then what the workload fixes: the model, the entrypoints to replace
    with their contract, the cases."""
    path = task_dir / INSTRUCTIONS_FILE
    given = path.read_text(encoding="utf-8").strip() if path.is_file() else (
        f"Make the {workload.engine} server faster by replacing "
        f"{', '.join(workload.kernels.entrypoints)} with faster kernels.")
    lines = [given, "", f"The server: {workload.engine} engine, {workload.model_label}, "
             f"{workload.precision}, tensor parallel {workload.tensor_parallel}.",
             f"Replace (in {', '.join(workload.editable)}):"]
    lines += [f"  - {SIGNATURES[name]}" for name in workload.kernels.entrypoints]
    lines += ["The cases timed (requests, prompt and output lengths as [low, high], "
              "concurrency):"]
    lines += [f"  - {c.name}: {c.requests} requests, input {list(c.input_len)}, output "
              f"{list(c.output_len)}, concurrency {c.max_concurrency}"
              + (f", p99 TPOT <= {c.p99_tpot_ms} ms" if c.p99_tpot_ms else "")
              for c in workload.cases]
    lines += [f"The workload is {WORKLOAD_FILE} (pinned by {LOCK_FILE}); read it, do not edit it."]
    return "\n".join(lines) + "\n"
