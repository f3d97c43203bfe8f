"""The ``aka`` command.

Results go to stdout (the run directory, tables, ``--json``); logs go to stderr. Errors a user can
fix are printed without a traceback and exit with status 2 (bad input) or 1 (failure).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aka_core import __version__
from aka_core.errors import EXIT_FAILURE, EXIT_NOT_JUDGED, EXIT_OK, EXIT_USAGE, AkaError, UsageError


def _host() -> Any:
    from aka_core.plugin.host import PluginHost

    return PluginHost()


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# --------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    from aka_core.logging_setup import configure_logging
    from aka_core.run.execute import create_run, execute_run
    from aka_core.run.reports import render_text, summary_rows

    host = _host()
    if args.resume and args.config:
        raise UsageError(f"give a run config or --resume, not both: a resumed run keeps the "
                         f"config it started with (ignoring {args.config})")
    if args.resume:
        run_dir = Path(args.resume).resolve()
    elif args.config:
        run_dir = create_run(Path(args.config), host, run_suffix=args.run_suffix,
                             output_root=Path(args.output_root) if args.output_root else None)
    else:
        raise UsageError("give a run config (aka run CONFIG) or a run to resume (--resume RUN_DIR)")
    import attrs

    from aka_core.models import RunConfig
    from aka_core.run.execute import read_run_file

    _CURRENT_RUN[0] = str(run_dir)
    meta = read_run_file(run_dir)
    # run.yaml keeps the config as written: an unset log_directory has RunConfig's one default
    log_dir = run_dir / meta["config"].get("log_directory",
                                           attrs.fields(RunConfig).log_directory.default)
    configure_logging(json_output=args.json_logs, level=args.log_level,
                      log_file=log_dir / "aka.jsonl", force=True)
    import structlog

    from aka_core.logging_setup import stderr_is_json

    say = structlog.get_logger("aka.run").info if stderr_is_json() else None
    if say:  # one format per stream: JSON log lines on stderr, the run directory on stdout
        say("run directory", run_dir=str(run_dir))
    else:
        print(f"run directory: {run_dir}", file=sys.stderr)
    results = execute_run(run_dir, host, show_progress=not args.no_progress)
    done = {r.task_id for r in results}
    missing = [t for t in meta["task_ids"] if t not in done]
    rows = summary_rows(results, missing)
    if say:
        say("run summary", tasks=rows, missing=missing)
    else:
        print(render_text(rows), file=sys.stderr)
    if missing:
        text = f"{len(missing)} task(s) have no result; finish them with `aka run --resume {run_dir}`"
        if say:
            say(text)
        else:
            print(text, file=sys.stderr)
    print(run_dir)
    return EXIT_OK


def cmd_run_task(args: argparse.Namespace) -> int:
    from aka_core.run.execute import run_one_task

    result = run_one_task(Path(args.run_dir).resolve(), args.task_id, _host(), phase=args.phase)
    print("agent_done" if result is None else result.status)
    return EXIT_OK


def cmd_plugins(args: argparse.Namespace) -> int:
    host = _host()
    data = host.describe()
    if args.json:
        _print_json(data)
        return EXIT_OK
    from aka_core.run.reports import format_table

    rows = [[p["kind"], p["name"], p["distribution"], p["version"] or "-",
             "builtin" if p["builtin"] else "entry point"] for p in data["plugins"]]
    print("\n".join(format_table(["kind", "name", "distribution", "version", "from"], rows)))
    for err in data["load_errors"]:
        print(f"\nfailed to load plugin {err['plugin']!r} from {err['distribution']} "
              f"{err['version']}: {err['error']}")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from aka_core.commands.validate import validate_paths

    return validate_paths([Path(p) for p in args.paths], _host(), run=args.run,
                          device=args.device, report_dir=Path(args.report_dir)
                          if args.report_dir else None, as_json=args.json,
                          report_file=Path(args.report) if args.report else None)


def cmd_task_new(args: argparse.Namespace) -> int:
    from aka_core.authoring.task_builder import draft_task

    draft = draft_task(Path(args.from_reference), name=args.name,
                       out=Path(args.out) if args.out else None, backend=args.backend,
                       example_shapes=args.example_shapes, sizes=args.sizes, dtype=args.dtype,
                       function=args.function)
    for note in draft.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"drafted {draft.task_id}; review task.yaml (sizes, tolerance, cost, instructions), "
          f"then run: aka validate {draft.path} --run --device cpu", file=sys.stderr)
    print(draft.path)
    return EXIT_OK


def cmd_tasks(args: argparse.Namespace) -> int:
    from aka_core import gpus
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.run.config import load_run_config, resolve_tasks_directory
    from aka_core.run.reports import format_table
    from aka_core.run.selection import discover_tasks, resolve_selectors

    host = _host()
    target = args.target
    if args.config:
        config = load_run_config(Path(args.config), host)
        root = resolve_tasks_directory(config, Path(args.config))
        selectors = args.selectors or list(config.tasks)
        model = gpus.target_model(target) if target else config.target_gpu_model
    else:
        root = Path(args.tasks_dir or "tasks").resolve()
        if not root.is_dir():
            raise UsageError(f"no tasks folder at {root}; pass --tasks-dir or --config")
        selectors = args.selectors or sorted(discover_tasks(root, host))
        model = gpus.target_model(target) if target else None
    ids = resolve_selectors(selectors, root, host)
    target = model.name if model is not None else None
    checks_gpu = model is not None and not model.is_cpu
    rows = []
    for task_id in ids:
        task = load_task(root.joinpath(*task_id.split("/")), task_id, host)
        reason = (gpus.skip_reason(task, model, host.backend_vendors(task.backend)) if model
                  else None)
        row = {"task": task_id, "family": task.family, "backend": task.backend,
               "cases": len(task.cases), "held_out": len(task.held_out_cases) + (
                   task.held_out_draws.count if task.held_out_draws else 0),
               "runs": reason is None, "skip_reason": reason}
        if checks_gpu:
            row["validated"] = gpus.validation_on(task, model) if reason is None else None
        rows.append(row)
    if args.json:
        _print_json({"target": target, "tasks": rows})
        return EXIT_OK
    body = []
    for r in rows:
        line = [r["task"], r["family"], r["backend"], str(r["cases"]), str(r["held_out"])]
        if model:
            line.append("yes" if r["runs"] else f"skip: {r['skip_reason']}")
        if checks_gpu:
            line.append(str(r["validated"].get("date", "yes")) if r["validated"] else "-")
        body.append(line)
    headers = ["task", "family", "backend", "cases", "held-out"] + (
        [f"runs on {target}"] if model else []) + ([f"validated on {target}"] if checks_gpu
                                                   else [])
    print("\n".join(format_table(headers, body)))
    if checks_gpu:
        runs = sum(r["runs"] for r in rows)
        done = sum(bool(r["validated"]) for r in rows)
        print(f"{len(rows)} tasks, {runs} run on {target}, {done} validated on it (a "
              f"validated_on entry of mode run on that GPU)")
    if not target:
        print("(which of them run on a GPU: --target H200, or --config CONFIG)", file=sys.stderr)
    return EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    if args.service:  # the client alone: a trainer's loop may call this for every sample
        data = _eval_through_service(args)
        if data is None:
            return EXIT_NOT_JUDGED
    else:
        from aka_core import api
        from aka_core.convert import unstructure

        data = unstructure(api.evaluate_candidate(args.task, args.candidate, device=args.device,
                                                  held_out=not args.no_held_out,
                                                  held_out_seed=args.held_out_seed,
                                                  measure_performance=not args.no_timing))
    if args.output:
        from aka_core.yamlio import write_yaml_atomic

        write_yaml_atomic(Path(args.output), data)
    if args.json:
        _print_json(data)
    elif args.full:
        from aka_core.yamlio import dump_yaml

        print(dump_yaml(data))
    else:
        print(_eval_summary(data))
    if data.get("status") == "infra_error":
        print("aka eval: not judged: the evaluator or this host failed (infra_error, exit 3); "
              "the reason is above", file=sys.stderr)
        return EXIT_NOT_JUDGED
    return EXIT_OK


def _eval_through_service(args: argparse.Namespace) -> dict[str, Any] | None:
    """The same evaluation by a running ``aka serve`` (its judges, runners and kernel store
    already warm): its record, or None (said why on stderr) where no evaluation came back."""
    from aka_core.service.client import ServiceClient, ServiceError, files_of
    from aka_core.service.server import read_url

    for flag, given in (("--no-held-out", args.no_held_out), ("--no-timing", args.no_timing),
                        ("--device", args.device != "auto")):
        if given:
            raise UsageError(f"{flag} cannot be used with --service: the service evaluates as it "
                             "was started (every case, timed, on its own devices)")
    target = str(args.service)
    url = target if target.startswith(("http://", "https://")) else read_url(Path(target))
    task = Path(args.task)
    # The service names tasks by their folder under its tasks folder: family/name.
    task_id = "/".join(task.resolve().parts[-2:]) if (task / "task.yaml").is_file() else args.task
    candidate = Path(args.candidate)
    if not candidate.is_dir():
        raise UsageError(f"--candidate {candidate}: no such folder")
    try:
        files = files_of(candidate)
    except ValueError as exc:
        raise UsageError(f"--candidate: {exc}") from None
    try:
        # A service that never answers is said so within seconds; one that answered and then
        # stops (a restart) is waited for as a trainer's client would.
        with ServiceClient(url, first_contact_s=3.0) as client:
            result = client.evaluate(task_id, files, held_out_seed=args.held_out_seed)
    except ServiceError as exc:
        raise UsageError(f"--service {target}: {exc}") from None
    if result.get("record"):
        return dict(result["record"])
    print(f"aka eval: not judged by the service at {url}: {result.get('status')}: "
          f"{result.get('message') or '-'} (request {result.get('id')})", file=sys.stderr)
    return None


def _eval_summary(data: dict[str, Any]) -> str:
    ev = data.get("evaluation", {})
    perf = ev.get("performance") or {}
    lines = [
        f"task:              {data['task_id']} ({data.get('family')}, {data.get('backend')})",
        f"device:            {(ev.get('device') or {}).get('name')}",
        f"compiled:          {data.get('pass_compilation')}",
        f"correct:           {data.get('pass_correctness')}",
        f"accepted:          {data.get('candidate_accepted')}"
        + ("" if data.get("candidate_accepted") else
           f"  ({(data.get('acceptance') or {}).get('reason') or data.get('error')})"),
    ]
    if perf.get("measured"):
        lo, hi = perf.get("ci95", [None, None])
        lines.append(f"speedup:           {perf['speedup']:.4f}  (95% CI {lo:.4f} .. {hi:.4f})")
        for case in perf.get("cases", []):
            lines.append(f"  {case['case']:<28} {case.get('baseline_median_ms', 0):.4f} ms -> "
                         f"{case.get('candidate_median_ms', 0):.4f} ms  x{case.get('speedup', 0):.4f}"
                         f"  [{case.get('method')}, {case.get('pairs')} pairs]")
    else:
        lines.append(f"speedup:           not measured ({perf.get('reason_not_measured', '-')})")
    reason = (data.get("scorer") or {}).get("reason") or {
        "compile_only": "not scored: compile-only, nothing ran",
        "infra_error": "not scored: the evaluator failed; retry",
        "error": "not scored: the task itself failed",
    }.get(str(data.get("status")), f"not scored (status {data.get('status')})")
    lines.append(f"score:             {data.get('score')}  ({reason})")
    phases = ev.get("phases_wall") or {}
    lines.append("seconds:           " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    return "\n".join(lines)


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from aka_core.service.server import ServeOptions, serve

    gpus: tuple[int, ...] = ()
    if args.gpus:
        try:
            gpus = tuple(int(g) for g in args.gpus.split(",") if g.strip())
        except ValueError:
            raise UsageError(f"--gpus {args.gpus!r}: a comma-separated list of GPU indices, "
                             "e.g. 0,1") from None
    elif args.device != "cpu":
        from aka_core.api import resolve_device

        if resolve_device(args.device) == "cuda":
            import torch

            gpus = tuple(range(torch.cuda.device_count()))
    for name in ("per_gpu", "workers", "max_queue", "max_attempts"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.holder_cpus is not None and args.holder_cpus < 0:
        raise UsageError("--holder-cpus must be 0 (none kept) or more")
    options = ServeOptions(tasks_root=Path(args.tasks), state=Path(args.state), host=args.host,
                           port=args.port, gpus=gpus, per_gpu=args.per_gpu,
                           cpu_workers=args.workers, max_queue=args.max_queue,
                           max_attempts=args.max_attempts,
                           keep_days=args.keep_days if args.keep_days > 0 else None,
                           prestart=args.prestart, holder_cpus=args.holder_cpus)
    asyncio.run(serve(options))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from aka_core.commands import export

    fmt = args.format or ("parquet" if str(args.output).endswith(".parquet") else "jsonl")
    count = export.write([Path(r) for r in args.runs], Path(args.output), fmt,
                         sources=args.sources)
    print(f"{count} rows written to {args.output} ({fmt})")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from aka_core.run.reports import render_text, summary_document, summary_rows, write_reports
    from aka_core.run.results import load_run

    record = load_run(Path(args.run_dir))
    results = [record.results[t] for t in record.task_ids if t in record.results]
    paths = write_reports(Path(args.run_dir))
    host = _host()
    for extra in host.notify("aka_report", run_dir=Path(args.run_dir), results=results,
                             reports_dir=Path(args.run_dir) / "reports"):
        paths.extend(Path(p) for p in (extra or []))
    if args.html:
        page = next((p for p in paths if p.suffix == ".html"), None)
        if page is None:
            raise UsageError("no plugin wrote an HTML report: pip install aka-report-html "
                             "(plugins/aka-report-html)")
        print(page)
        return EXIT_OK
    if args.json:
        _print_json(summary_document(summary_rows(results)))
    else:
        print(render_text(summary_rows(results)))
        print("\nwritten: " + ", ".join(str(p) for p in paths))
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from aka_core.commands.compare import compare_runs, comparison_as_dict, render_comparison

    side_a = [Path(p) for p in args.run_a.split(",")]
    side_b = [Path(p) for p in args.run_b.split(",")]
    comparison = compare_runs(side_a if len(side_a) > 1 else side_a[0],
                              side_b if len(side_b) > 1 else side_b[0])
    if args.html:
        try:
            from aka_report_html.compare import render
        except ImportError:
            raise UsageError("--html needs the aka-report-html plugin: pip install aka-report-html "
                             "(plugins/aka-report-html)") from None
        out = Path(args.html)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(comparison), encoding="utf-8")
    if args.json:
        _print_json(comparison_as_dict(comparison))
    else:
        print(render_comparison(comparison))
        if args.html:
            print(f"written: {args.html}")
    return EXIT_OK


def cmd_selfcheck(args: argparse.Namespace) -> int:
    from aka_core.commands.selfcheck import render, selfcheck

    result = selfcheck(Path(args.workspace), _host(), device=args.device,
                       timing=not args.no_timing)
    if args.json:
        from aka_core.convert import unstructure

        _print_json(unstructure(result))
    else:
        print(render(result))
    return EXIT_OK if result["pass_correctness"] else EXIT_FAILURE


def cmd_check_agents(args: argparse.Namespace) -> int:
    from aka_core.kits.agent_runtime import AgentCheck
    from aka_core.plugin.records import CheckedAgent
    from aka_core.run.config import load_run_config

    host = _host()
    checks: list[AgentCheck] = []
    for path in args.configs:
        config = load_run_config(Path(path), host)
        agent = host.agent(config.agent.name).make(config.agent.options)
        if isinstance(agent, CheckedAgent):
            checks.append(agent.check())
        else:
            checks.append(AgentCheck(agent=config.agent.name, installed=True,
                                     authenticated=True, detail="runs in-process: nothing to "
                                     "install or log in to"))
    if args.json:
        _print_json([{**attrs_asdict(c), "ready": c.ready} for c in checks])
    else:
        for c in checks:
            auth = {True: "authenticated", False: "NOT authenticated", None: "login unknown"}[
                c.authenticated]
            state = "ready" if c.ready else "NOT READY"
            installed = f"installed ({c.version or 'version unknown'})" if c.installed else \
                "NOT installed"
            print(f"{c.agent:<14} {state:<9}  {installed}, {auth}; {c.detail}")
    return EXIT_OK if all(c.ready for c in checks) else EXIT_FAILURE


def cmd_smoke(args: argparse.Namespace) -> int:
    from aka_core.commands.smoke import as_dicts, render, smoke

    checks = smoke(_host(), executor=args.executor, target_gpu_model=args.target,
                   image=args.image)
    if args.json:
        _print_json(as_dicts(checks))
    else:
        print(render(checks))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILURE


def attrs_asdict(obj: Any) -> dict[str, Any]:
    import attrs

    return attrs.asdict(obj)


# --------------------------------------------------------------------------- parser


DEVICE_HELP = "where candidates run: auto (the GPU if there is one), cuda or cpu"
JSON_HELP = "print the result as JSON on stdout"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aka", description="AgentKernelArena: evaluate "
                                     "GPU-kernel agents against preserved baselines.")
    parser.add_argument("--version", action="version", version=f"aka {__version__}")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="least severe log lines shown on stderr (default: info)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a config (or resume a run); prints the run directory")
    p.add_argument("config", nargs="?", help="run config YAML")
    p.add_argument("--run-suffix", help="appended to the run directory's name")
    p.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run")
    p.add_argument("--output-root", help="where run directories go (default: current folder)")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument("--json-logs", action="store_true", default=None,
                   help="JSON log lines on stderr even on a terminal")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("run-task", help="run one task of an existing run (used by executors)")
    p.add_argument("run_dir", help="the run directory `aka run` created")
    p.add_argument("task_id", help="a task of that run, e.g. triton2triton/gelu")
    p.add_argument("--phase", choices=["all", "agent", "evaluate"], default="all",
                   help="agent: steps 1-3 (prints agent_done, or the status if the task ended); "
                        "evaluate: steps 4-7 after it, e.g. in a container without network")
    p.set_defaults(func=cmd_run_task)

    p = sub.add_parser("validate", help="check run configs and task folders")
    p.add_argument("paths", nargs="+", help="run config files, task folders or folders of tasks")
    p.add_argument("--run", action="store_true",
                   help="also run each task's reference and baseline through the evaluator")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help=DEVICE_HELP)
    p.add_argument("--report-dir", help="write validation_report.yaml files here")
    p.add_argument("--report", metavar="FILE", help="write every task's checks to FILE (JSON "
                   "for a .json name, else YAML)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("task", help="author tasks: aka task new --from-reference REF.py")
    task_sub = p.add_subparsers(dest="task_command", required=True)
    p = task_sub.add_parser("new", help="draft a task folder from a reference function "
                            "(docs/task-format.md, 'Drafting and validating a task')")
    p.add_argument("--from-reference", required=True, metavar="REF.py",
                   help="a .py file defining the reference function; its docstring's Shapes: "
                        "section describes the inputs")
    p.add_argument("--name", metavar="FAMILY/NAME", help="the task id (default: "
                   "torch2triton/<function> or torch2torch/<function>)")
    p.add_argument("--out", metavar="DIR", help="the folder to create (default: tasks/<name>)")
    p.add_argument("--backend", choices=["triton", "torch"], default="triton",
                   help="triton: a Triton task with a PyTorch baseline (default); torch: the "
                        "kernel is the reference's math in plain PyTorch")
    p.add_argument("--example-shapes", metavar="SHAPES", help="input shapes, overriding the "
                   "docstring's: 'x: [M, N]; weight: [N] float32; ids: [T] int64 < V'")
    p.add_argument("--sizes", metavar="SIZES", help="the typical case's sizes: 'M=8192,N=4096'")
    p.add_argument("--dtype", default="bfloat16", help="the cases' dtype, for tensors whose shape "
                   "names none (default bfloat16)")
    p.add_argument("--function", help="the reference function, where the file defines several")
    p.set_defaults(func=cmd_task_new)

    p = sub.add_parser("plugins", help="list installed plugins and load errors")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("tasks", help="list the tasks selectors match, and why a task would skip")
    p.add_argument("selectors", nargs="*", help="task ids or folders under tasks/")
    p.add_argument("--config", help="take tasks, tasks folder and target from a run config")
    p.add_argument("--tasks-dir", help="the tasks folder (default ./tasks)")
    p.add_argument("--target", help="target GPU model, e.g. H200, MI300X, cpu")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_tasks)

    p = sub.add_parser("eval", help="evaluate one candidate against a task (the RL entry point)")
    p.add_argument("task", help="task folder, e.g. tasks/triton2triton/gelu")
    p.add_argument("--candidate", required=True, help="folder holding the candidate's files")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help=DEVICE_HELP)
    p.add_argument("--no-held-out", action="store_true", help="skip the held-out cases")
    p.add_argument("--held-out-seed", type=int, default=None, metavar="N",
                   help="draw the held-out shapes from N (the same for every candidate); "
                        "default: a fresh secret draw per evaluation")
    p.add_argument("--no-timing", action="store_true", help="correctness only")
    p.add_argument("--output", help="also write the task result YAML here")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--full", action="store_true", help="print the full result as YAML")
    p.add_argument("--service", metavar="URL|STATE",
                   help="evaluate through a running `aka serve` (its URL, or its state folder): "
                        "no process to start, its kernel store warm; the same judge and record")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("serve", help="the reward service: evaluations over HTTP, queued durably")
    p.add_argument("--tasks", default="tasks", help="the tasks folder requests name tasks in "
                   "(default: ./tasks)")
    p.add_argument("--state", default=".aka-serve", help="folder of the durable queue and the "
                   "candidates waiting for a slot (default: ./.aka-serve)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one, "
                   "written to STATE/service.json)")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help=DEVICE_HELP)
    p.add_argument("--gpus", help="GPU indices to evaluate on, e.g. 0,1 (default: every GPU)")
    p.add_argument("--per-gpu", type=int, default=4, help="evaluations in flight per GPU: one "
                   "checks and times while the others start and build (default 4)")
    p.add_argument("--workers", type=int, default=1, help="evaluations in flight without a GPU "
                   "(default 1)")
    p.add_argument("--prestart", action=argparse.BooleanOptionalAction, default=None,
                   help="keep each slot's next evaluation started (PyTorch imported, runners "
                        "confined and waiting); default: on with GPUs, off without")
    p.add_argument("--holder-cpus", type=int, default=None, metavar="N",
                   help="CPUs per GPU kept for the evaluation holding it, away from those "
                        "starting (default: 4 where the host leaves 4 others, else none; "
                        "0: none kept)")
    p.add_argument("--max-queue", type=int, default=1024, help="queued requests beyond which "
                   "new ones get 429 with Retry-After (default 1024)")
    p.add_argument("--max-attempts", type=int, default=3, help="attempts of an evaluation the "
                   "evaluator failed before it is reported as infra_error (default 3)")
    p.add_argument("--keep-days", type=float, default=30.0, help="forget judged requests this "
                   "many days after they ended (0: keep every record; default 30)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("selfcheck", help="check a workspace's candidate (advisory; for agents)")
    p.add_argument("workspace", nargs="?", default=".", help="the task workspace (default: here)")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help=DEVICE_HELP)
    p.add_argument("--no-timing", action="store_true", help="build and correctness only")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_selfcheck)

    p = sub.add_parser("check-agents", help="is each config's agent CLI installed and logged in?")
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="run config files")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_check_agents)

    p = sub.add_parser("smoke", help="check this host's (or a container's) runtime for a target")
    p.add_argument("--target", help="target GPU model, e.g. H200, MI300X, cpu")
    p.add_argument("--executor", help="also check inside this executor's runtime (docker)")
    p.add_argument("--image", help="the image to check (docker executor)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_smoke)

    p = sub.add_parser("report", help="regenerate and print a run's reports")
    p.add_argument("run_dir", help="the run directory `aka run` printed")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--html", action="store_true",
                   help="print only the path of the self-contained HTML report (aka-report-html)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("export", help="runs as a dataset: one row per task attempt")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories `aka run` printed")
    p.add_argument("--output", "-o", required=True, help="file to write (.jsonl or .parquet)")
    p.add_argument("--format", choices=["jsonl", "parquet"],
                   help="default: from the output's suffix, else jsonl")
    p.add_argument("--sources", action="store_true",
                   help="include the text of the candidate's files (not only their sha256)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("compare", help="compare two runs task by task")
    p.add_argument("run_a", help="run directory (comma-separated for repeated runs)")
    p.add_argument("run_b", help="run directory (comma-separated for repeated runs)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--html", metavar="FILE", help="also write the comparison as a self-contained "
                   "HTML page (aka-report-html)")
    p.set_defaults(func=cmd_compare)
    return parser


_CURRENT_RUN: list[str | None] = [None]
"""The run directory of this ``aka run``, once created: what an interrupted run resumes."""


def _resume_hint() -> str:
    run_dir = _CURRENT_RUN[0]
    return f"; resume with `aka run --resume {run_dir}`" if run_dir else ""


def _check_environment() -> None:
    """Variables aka reads deep inside an evaluation, checked once here: a bad value is one
    usage error, not an evaluator fault in every evaluation."""
    for name in ("AKA_SCRATCH_LIMIT", "AKA_MEMORY_LIMIT"):
        if os.environ.get(name):
            from aka_core.evaluation import watch_thread

            try:
                watch_thread.size_from_env(name, 0)
            except ValueError as exc:
                raise UsageError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    from aka_core.interrupt import EXIT_SIGTERM, Interrupted, sigterm_interrupts

    args = build_parser().parse_args(argv)
    if not getattr(args, "service", None):
        # `aka eval --service` logs nothing: a trainer's loop may run it for every sample, and
        # structlog's import is a third of the client's start-up.
        from aka_core.logging_setup import configure_logging

        configure_logging(level=args.log_level)
    try:
        # SIGTERM, like Ctrl-C, stops what aka started (an agent CLI in its own session, a
        # judge) before aka exits, instead of ending aka alone.
        with sigterm_interrupts():
            _check_environment()
            return int(args.func(args))
    except AkaError as exc:
        print(f"aka: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"aka: interrupted{_resume_hint()}", file=sys.stderr)
        return 130
    except Interrupted as exc:
        print(f"aka: {exc}; what it had started (an agent CLI, a judge) was stopped"
              f"{_resume_hint()}", file=sys.stderr)
        return EXIT_SIGTERM
    except BrokenPipeError:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["EXIT_USAGE", "build_parser", "main"]
