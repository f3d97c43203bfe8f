"""Is an e2e run's noise on the GPU or on the host? (an engineer's probe, GPU only)

The builtin engine of one e2e task (its baseline kernel tree, the task's weights and first case),
in this process, no judge:

  replay   the captured decode graph replayed back to back, timed by CUDA events: the GPU's own
           time for one decode step of every slot, with no host in between
  runs     R runs of the case's requests through ``engine.step`` as the engine's server loop runs
           them: each step's wall time by kind (a step that admitted requests: prefill; else
           decode), and the run's tokens per second
  pinned   the same runs with this process pinned to one CPU core

Usage:  AKA_E2E_CACHE=/opt/e2e-cache python bench/e2e_step_probe.py --out DIR [--task qwen3_norms]
            [--runs 5]
Writes DIR/e2e_steps.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from e2e_noise_probe import probe_task, spread  # bench/, beside this script


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--task", default="qwen3_norms")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiny", action="store_true",
                        help="the task's tiny CPU variant, no graph (a smoke test of this script)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch
    from aka_backend_e2e import engine as engine_module
    from aka_backend_e2e import measure
    from aka_backend_e2e.kernels_api import load_tree
    from aka_backend_e2e.model import config_by_name
    from aka_backend_e2e.weights import read_weights
    from aka_backend_e2e.workload import builtin_weights, load_workload

    task_dir, device = probe_task(args.task, args.tiny)
    workload = load_workload(task_dir / "workload.yaml")
    config = config_by_name(workload.model.config)
    path, digest = builtin_weights(workload.model.config, workload.model.seed)
    tensors, _ = read_weights(path, digest)
    case = workload.cases[0]
    kernels = load_tree(task_dir / workload.kernels.tree)
    from aka_backend_e2e.adapters.builtin import max_len_of

    max_len = max_len_of(case)
    data: dict[str, Any] = {"task": args.task, "torch": torch.__version__}
    with torch.no_grad():
        engine = engine_module.BuiltinEngine(config, tensors, kernels, slots=case.max_concurrency,
                                             max_len=max_len, device=device,
                                             dtype=getattr(torch, workload.precision))
        # 1. The decode graph alone, back to back (GPU time per step).
        replays: list[float] = []
        for _ in range(10 if engine.graph is not None else 0):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(50):
                engine.graph.replay()
            end.record()
            end.synchronize()
            replays.append(start.elapsed_time(end) / 50)
        data["replay_ms"] = replays
        if replays:
            print(f"replay: {statistics.median(replays):.4f} ms per decode step "
                  f"({min(replays):.4f}-{max(replays):.4f})", flush=True)

        reqs = [engine_module.Request(id=r.id, prompt=r.prompt, max_tokens=r.max_tokens)
                for r in measure.case_requests(case, config.vocab, prompt_key="probe")]

        def one_run(tag: str, i: int) -> dict[str, Any]:
            prefill_steps: list[float] = []
            decode_steps: list[float] = []
            tokens = 0

            def emit(line: dict[str, Any]) -> None:
                nonlocal tokens
                tokens += len(line.get("step", ()))

            run = [engine_module.Request(id=f"{tag}{i}-{r.id}", prompt=r.prompt,
                                         max_tokens=r.max_tokens) for r in reqs]
            # The judge keeps max_concurrency in flight: submit as slots free up.
            pending = list(run)
            began = time.perf_counter()
            while pending or engine.has_work:
                free = sum(1 for a in engine.active if a is None) - len(engine.waiting)
                if free > 0 and pending:
                    engine.submit(pending[:free])
                    del pending[:free]
                admitting = bool(engine.waiting)
                t0 = time.perf_counter()
                engine.step(emit)
                (prefill_steps if admitting else decode_steps).append(
                    (time.perf_counter() - t0) * 1e3)
            wall = time.perf_counter() - began
            row = {"tag": tag, "i": i, "tok_s": tokens / wall, "wall_s": wall,
                   "decode_ms_median": statistics.median(decode_steps),
                   "decode_ms_p90": sorted(decode_steps)[int(0.9 * len(decode_steps))],
                   "decode_steps": len(decode_steps), "prefill_steps_ms": prefill_steps,
                   "prefill_ms_total": sum(prefill_steps)}
            print(f"{tag:6} {i}: {row['tok_s']:7.1f} tok/s  decode step {row['decode_ms_median']:.3f}"
                  f" ms (p90 {row['decode_ms_p90']:.3f})  prefill steps {len(prefill_steps)} "
                  f"total {row['prefill_ms_total']:.1f} ms", flush=True)
            return row

        rows = [one_run("runs", i) for i in range(args.runs)]
        try:
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
            rows += [one_run("pinned", i) for i in range(args.runs)]
        except OSError as exc:
            data["pinned_error"] = str(exc)
    data["rows"] = rows
    data["spread"] = {}
    for tag in ("runs", "pinned"):
        got = [r for r in rows if r["tag"] == tag]
        if got:
            data["spread"][tag] = {k: spread([r[k] for r in got]) for k in
                                   ("tok_s", "decode_ms_median", "prefill_ms_total")}
            print(tag, json.dumps(data["spread"][tag]), flush=True)
    if replays:
        data["spread"]["replay_ms"] = spread(replays)
    (args.out / "e2e_steps.json").write_text(json.dumps(data, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
