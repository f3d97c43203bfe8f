"""``aka export``: runs as a dataset, one row per task attempt, for trainers and analysis.

Each row flattens a task result (ids, status, gates, speedup and its CI, score, the scorer, the
failure, the agent's usage and cost, timings) and adds the sha256 of each of the candidate's
editable files as found in the run's workspace (optionally their text: ``sources``). JSON Lines
keeps nested values (file maps, CIs) as JSON; Parquet (pyarrow) stores them as JSON strings, so
every column has one plain type. Both load with pandas, polars or ``datasets``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from aka_core.errors import UsageError
from aka_core.models import TASK_FILE, TaskResult
from aka_core.run.reports import finite
from aka_core.run.results import RunRecord, load_run

FORMATS = ("jsonl", "parquet")
NESTED = ("ci95", "candidate_files", "sources")
SOURCE_LIMIT_BYTES = 1 << 20


def _editable(run_dir: Path, task_id: str) -> list[str] | None:
    """The task's editable files, from the run's preserved copy of the task (None: unknown)."""
    from aka_core.run.lifecycle import task_dir
    from aka_core.yamlio import load_plain_yaml

    for name in ("baseline", "workspace"):
        path = task_dir(run_dir, task_id) / name / TASK_FILE
        if path.is_file():
            try:
                editable = load_plain_yaml(path).get("editable")
            except Exception:  # a damaged copy: fall back to every file
                return None
            if isinstance(editable, list) and all(isinstance(e, str) for e in editable):
                return editable
    return None


def candidate_files(run_dir: Path, task_id: str, *, sources: bool) -> tuple[dict[str, str],
                                                                           dict[str, str] | None]:
    """(path -> sha256, path -> text or None) of the candidate's files in the run's workspace."""
    from aka_core.run.lifecycle import task_dir

    workspace = task_dir(run_dir, task_id) / "workspace"
    if not workspace.is_dir():
        return {}, ({} if sources else None)
    editable = _editable(run_dir, task_id)
    paths = ([workspace / e for e in editable] if editable is not None else
             sorted(p for p in workspace.rglob("*") if p.is_file() and "__pycache__" not in p.parts))
    digests: dict[str, str] = {}
    texts: dict[str, str] | None = {} if sources else None
    for path in paths:
        if not path.is_file():
            continue
        rel = path.relative_to(workspace).as_posix()
        data = path.read_bytes()
        digests[rel] = hashlib.sha256(data).hexdigest()
        if texts is not None and len(data) <= SOURCE_LIMIT_BYTES:
            texts[rel] = data.decode("utf-8", errors="replace")
    return digests, texts


def row(record: RunRecord, result: TaskResult, *, sources: bool = False) -> dict[str, Any]:
    evaluation = result.evaluation
    performance, failure = evaluation.performance, evaluation.failure
    agent = result.agent_execution
    usage = agent.usage if agent else None
    digests, texts = candidate_files(record.run_dir, result.task_id, sources=sources)
    config = record.run_yaml.get("config") or {}
    out: dict[str, Any] = {
        "run": record.name, "run_dir": str(record.run_dir), "task_id": result.task_id,
        "family": result.family, "backend": result.backend, "status": result.status,
        "agent": (config.get("agent") or {}).get("template") if isinstance(config, dict) else None,
        "agent_status": agent.status if agent else None,
        "agent_model": usage.model if usage else None,
        "agent_seconds": finite(agent.duration_seconds) if agent else None,
        "agent_turns": usage.turns if usage else None,
        "input_tokens": usage.input_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
        "cost_usd": finite(usage.cost_usd) if usage else None,
        "pass_compilation": result.pass_compilation, "pass_correctness": result.pass_correctness,
        "accepted": result.candidate_accepted,
        "acceptance_reason": result.acceptance.reason if result.acceptance else None,
        "speedup": finite(result.speedup_ratio),
        "ci95": [finite(v) for v in (performance.ci95 if performance else None) or []] or None,
        "performance_measured": performance is not None and performance.measured,
        "score": finite(result.score), "scorer": (result.scorer or {}).get("name"),
        "failure_kind": failure.kind if failure else None,
        "failure_message": failure.message if failure else None,
        "device": evaluation.device.name if evaluation.device else None,
        "duration_seconds": finite(result.duration_seconds),
        "started_at": result.started_at, "finished_at": result.finished_at,
        "error": result.error, "skip_reason": result.skip_reason,
        "candidate_files": digests,
    }
    if sources:
        out["sources"] = texts
    return out


def rows(run_dirs: Sequence[Path], *, sources: bool = False) -> Iterator[dict[str, Any]]:
    for run_dir in run_dirs:
        record = load_run(Path(run_dir))
        for result in record.results.values():
            yield row(record, result, sources=sources)


def write(run_dirs: Sequence[Path], output: Path, fmt: str, *, sources: bool = False) -> int:
    """Write the rows of ``run_dirs`` to ``output``; returns how many."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    data = list(rows(run_dirs, sources=sources))
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    if fmt == "jsonl":
        with tmp.open("w", encoding="utf-8") as handle:
            for item in data:
                handle.write(json.dumps(item, sort_keys=True) + "\n")
    else:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise UsageError("--format parquet needs pyarrow: pip install pyarrow "
                             "(or use --format jsonl)") from None
        flat = [{k: json.dumps(v, sort_keys=True) if k in NESTED and v is not None else v
                 for k, v in item.items()} for item in data]
        pq.write_table(pa.Table.from_pylist(flat), tmp)
    tmp.replace(output)
    return len(data)


def read(path: Path) -> list[dict[str, Any]]:
    """The rows of an export (either format), nested values decoded."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        items = pq.read_table(path).to_pylist()
        return [{k: json.loads(v) if k in NESTED and isinstance(v, str) else v
                 for k, v in item.items()} for item in items]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
