"""A run as one self-contained HTML page: ``reports/report.html``, through the ``aka_report`` hook.

Everything is in the file: CSS, a few lines of JavaScript (the table sorts by any column; a
script error is recorded on ``<body data-errors>`` and a finished script sets ``data-ready``, which
the tests read through headless Chromium), and the plots as inline SVG drawn here:

* the speedup of each task with its 95% CI (log scale, the 1.0x and 1.05x lines),
* the distribution of scores, the breakdown of statuses,
* the agent's cost against the speedup (when the agent reported costs),
* per task, its timed cases (baseline and candidate medians, speedup and CI, pairs, method).
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aka_core.plugin import TaskResult, hookimpl

REPORT_FILE = "report.html"
COLORS = {"dot": "#1f6feb", "ci": "#7aa7f0", "ok": "#2da44e", "bad": "#cf222e", "axis": "#57606a",
          "grid": "#d0d7de", "bar": "#8250df"}
STATUS_COLORS = {"completed": "#2da44e", "compile_only": "#8250df", "skipped": "#8c959f",
                 "error": "#cf222e", "infra_error": "#bf8700"}


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt(value: Any, spec: str = ".3f") -> str:
    number = _num(value)
    return "-" if number is None else format(number, spec)


# --------------------------------------------------------------------------- plots


def _log_axis(lo: float, hi: float) -> list[float]:
    ticks = [0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0]
    return [t for t in ticks if lo <= t <= hi]


def speedup_plot(results: Sequence[TaskResult]) -> str:
    rows = []
    for r in results:
        s = _num(r.speedup_ratio)
        if s is None or s <= 0:
            continue
        perf = r.evaluation.performance
        ci = (perf.ci95 if perf is not None else None) or [s, s]
        lo, hi = (_num(ci[0]) or s, _num(ci[1]) or s) if len(ci) == 2 else (s, s)
        rows.append((r.task_id, s, max(lo, 1e-6), max(hi, 1e-6), r.candidate_accepted))
    if not rows:
        return "<p class='note'>No task measured a speedup (no GPU, or no candidate passed).</p>"
    rows.sort(key=lambda row: row[1])
    lo = min(0.5, min(row[2] for row in rows) * 0.9)
    hi = max(2.0, max(row[3] for row in rows) * 1.1)
    left, width, step, top = 260, 560, 22, 24
    height = top + step * len(rows) + 30

    def x(value: float) -> float:
        return left + width * (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))

    parts = [f"<svg class='plot' id='speedup-plot' width='{left + width + 20}' height='{height}' "
             f"role='img' aria-label='speedup per task with 95% CI'>"]
    for tick in _log_axis(lo, hi):
        parts.append(f"<line x1='{x(tick):.1f}' y1='{top - 6}' x2='{x(tick):.1f}' "
                     f"y2='{height - 24}' stroke='{COLORS['grid']}'/>"
                     f"<text x='{x(tick):.1f}' y='{height - 8}' text-anchor='middle'>{tick:g}x</text>")
    for ref, dash in ((1.0, ""), (1.05, " stroke-dasharray='4 3'")):
        parts.append(f"<line x1='{x(ref):.1f}' y1='{top - 10}' x2='{x(ref):.1f}' "
                     f"y2='{height - 24}' stroke='{COLORS['axis']}'{dash}/>")
    for i, (task, s, clo, chi, accepted) in enumerate(rows):
        y = top + i * step + step / 2
        color = COLORS["dot"] if accepted else COLORS["bad"]
        parts.append(f"<text x='{left - 8}' y='{y + 4:.1f}' text-anchor='end'>{_e(task)}</text>"
                     f"<line x1='{x(clo):.1f}' y1='{y:.1f}' x2='{x(chi):.1f}' y2='{y:.1f}' "
                     f"stroke='{COLORS['ci']}' stroke-width='3'/>"
                     f"<circle cx='{x(s):.1f}' cy='{y:.1f}' r='5' fill='{color}'>"
                     f"<title>{_e(task)}: {s:.3f}x [{clo:.3f}, {chi:.3f}]</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def bar_plot(counts: Sequence[tuple[str, int, str]], plot_id: str, label: str) -> str:
    total = max((c for _, c, _ in counts), default=0)
    if not total:
        return "<p class='note'>Nothing to show.</p>"
    left, width, step = 140, 360, 24
    height = step * len(counts) + 10
    parts = [f"<svg class='plot' id='{plot_id}' width='{left + width + 60}' height='{height}' "
             f"role='img' aria-label='{_e(label)}'>"]
    for i, (name, count, color) in enumerate(counts):
        y = 5 + i * step
        w = width * count / total
        parts.append(f"<text x='{left - 8}' y='{y + 15}' text-anchor='end'>{_e(name)}</text>"
                     f"<rect x='{left}' y='{y + 3}' width='{w:.1f}' height='{step - 8}' "
                     f"fill='{color}'/><text x='{left + w + 6:.1f}' y='{y + 15}'>{count}</text>")
    parts.append("</svg>")
    return "".join(parts)


def score_histogram(results: Sequence[TaskResult]) -> str:
    scores = [_num(r.score) or 0.0 for r in results if r.status != "skipped"]
    bins = [0] * 10
    for score in scores:
        bins[min(9, max(0, int(score * 10)))] += 1
    return bar_plot([(f"{i / 10:.1f}-{(i + 1) / 10:.1f}", n, COLORS["bar"])
                     for i, n in enumerate(bins)], "score-plot", "distribution of scores")


def status_plot(results: Sequence[TaskResult]) -> str:
    counts = Counter(r.status for r in results)
    return bar_plot([(status, n, STATUS_COLORS.get(status, COLORS["axis"]))
                     for status, n in sorted(counts.items())], "status-plot", "statuses")


def cost_plot(results: Sequence[TaskResult]) -> str:
    points = []
    for r in results:
        usage = r.agent_execution.usage if r.agent_execution else None
        cost, s = (_num(usage.cost_usd) if usage else None), _num(r.speedup_ratio)
        if cost is not None and s is not None and s > 0:
            points.append((r.task_id, cost, s))
    if not points:
        return "<p class='note'>The agent reported no costs.</p>"
    left, width, height, top = 60, 480, 260, 10
    max_cost = max(c for _, c, _ in points) * 1.1 or 1.0
    lo, hi = min(0.5, min(s for *_, s in points)), max(2.0, max(s for *_, s in points) * 1.1)

    def y(value: float) -> float:
        return top + height - height * (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))

    parts = [f"<svg class='plot' id='cost-plot' width='{left + width + 20}' height='{top + height + 40}' "
             "role='img' aria-label='agent cost against speedup'>",
             f"<line x1='{left}' y1='{top + height}' x2='{left + width}' y2='{top + height}' "
             f"stroke='{COLORS['axis']}'/><line x1='{left}' y1='{top}' x2='{left}' "
             f"y2='{top + height}' stroke='{COLORS['axis']}'/>",
             f"<text x='{left + width / 2}' y='{top + height + 32}' text-anchor='middle'>agent cost "
             f"(USD, 0 to {max_cost:.2f})</text>"]
    for tick in _log_axis(lo, hi):
        parts.append(f"<text x='{left - 6}' y='{y(tick) + 4:.1f}' text-anchor='end'>{tick:g}x</text>")
    for task, cost, s in points:
        parts.append(f"<circle cx='{left + width * cost / max_cost:.1f}' cy='{y(s):.1f}' r='5' "
                     f"fill='{COLORS['dot']}'><title>{_e(task)}: ${cost:.3f}, {s:.3f}x</title>"
                     "</circle>")
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- tables


COLUMNS = ("task", "status", "compiled", "correct", "accepted", "speedup", "95% CI", "score",
           "agent", "turns", "tokens in", "tokens out", "cost $", "seconds")


def task_rows(results: Sequence[TaskResult]) -> str:
    out = []
    for r in results:
        perf = r.evaluation.performance
        ci = (perf.ci95 if perf is not None else None) or []
        agent = r.agent_execution
        usage = agent.usage if agent else None
        cells: list[tuple[Any, str]] = [
            (r.task_id, _e(r.task_id)), (r.status, _e(r.status)),
            (r.pass_compilation, _e(r.pass_compilation)), (r.pass_correctness, _e(r.pass_correctness)),
            (r.candidate_accepted, _e(r.candidate_accepted)),
            (_num(r.speedup_ratio), _fmt(r.speedup_ratio)),
            (_num(ci[0]) if len(ci) == 2 else None,
             f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if len(ci) == 2 else "-"),
            (_num(r.score), _fmt(r.score, ".4f")),
            (agent.status if agent else None, _e(agent.status if agent else "-")),
            (usage.turns if usage else None, _e(usage.turns if usage and usage.turns is not None else "-")),
            (usage.input_tokens if usage else None,
             _e(usage.input_tokens if usage and usage.input_tokens is not None else "-")),
            (usage.output_tokens if usage else None,
             _e(usage.output_tokens if usage and usage.output_tokens is not None else "-")),
            (_num(usage.cost_usd) if usage else None, _fmt(usage.cost_usd if usage else None)),
            (_num(r.duration_seconds), _fmt(r.duration_seconds, ".1f")),
        ]
        out.append("<tr>" + "".join(
            f"<td data-v='{_e(json.dumps(value))}'>{shown}</td>" for value, shown in cells) + "</tr>")
    return "\n".join(out)


def case_sections(results: Sequence[TaskResult]) -> str:
    out = []
    for r in results:
        perf, failure = r.evaluation.performance, r.evaluation.failure
        cases = (perf.cases if perf is not None else None) or []
        if not cases and failure is None:
            continue
        body = [f"<details><summary>{_e(r.task_id)}</summary>"]
        if failure is not None:
            body.append(f"<p class='fail'>{_e(failure.kind)}: {_e(failure.message)}</p>")
        if cases:
            body.append("<table class='cases'><tr><th>case</th><th>held out</th><th>method</th>"
                        "<th>pairs</th><th>baseline ms</th><th>candidate ms</th><th>speedup</th>"
                        "<th>95% CI</th></tr>")
            for case in cases:
                ci = case.ci95 or []
                body.append(
                    f"<tr><td>{_e(case.case)}</td><td>{_e(case.held_out)}</td>"
                    f"<td>{_e(case.method)}</td><td>{_e(case.pairs)}</td>"
                    f"<td>{_fmt(case.baseline_median_ms, '.4f')}</td>"
                    f"<td>{_fmt(case.candidate_median_ms, '.4f')}</td>"
                    f"<td>{_fmt(case.speedup)}</td>"
                    f"<td>{'[' + _fmt(ci[0]) + ', ' + _fmt(ci[1]) + ']' if len(ci) == 2 else '-'}"
                    "</td></tr>")
            body.append("</table>")
        body.append("</details>")
        out.append("".join(body))
    return "\n".join(out) or "<p class='note'>No timed cases.</p>"


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}th,td{padding:4px 8px;border-bottom:1px solid #d0d7de;
text-align:right;white-space:nowrap}th{cursor:pointer;background:#f6f8fa;position:sticky;top:0}
td:first-child,th:first-child{text-align:left}.note{color:#57606a}.fail{color:#cf222e}
.plots{display:flex;flex-wrap:wrap;gap:24px}.plot text{font-size:12px;fill:#1f2328}
.summary span{margin-right:18px}
"""

def sort_script(column: int) -> str:
    """The page's script: sortable ``#tasks``, sorted at load by ``column``, descending."""
    return SCRIPT.replace("SORT_COLUMN", str(column))


SCRIPT = """
document.body.dataset.errors = "";
window.addEventListener("error", function (e) { document.body.dataset.errors += e.message + ";"; });
(function () {
  var table = document.getElementById("tasks");
  var heads = table.querySelectorAll("th");
  heads.forEach(function (th, col) {
    th.addEventListener("click", function () {
      var rows = Array.prototype.slice.call(table.tBodies[0].rows);
      var dir = th.dataset.dir === "asc" ? -1 : 1;
      heads.forEach(function (h) { delete h.dataset.dir; });
      th.dataset.dir = dir === 1 ? "asc" : "desc";
      rows.sort(function (a, b) {
        var x = JSON.parse(a.cells[col].dataset.v), y = JSON.parse(b.cells[col].dataset.v);
        if (x === y) return 0;
        if (x === null) return 1;
        if (y === null) return -1;
        return (x < y ? -1 : 1) * dir;
      });
      rows.forEach(function (r) { table.tBodies[0].appendChild(r); });
    });
  });
  heads[SORT_COLUMN].click(); heads[SORT_COLUMN].click();   // descending
  document.body.dataset.ready = "1";
})();
"""


def render(results: Sequence[TaskResult], title: str) -> str:
    judged = [r for r in results if r.status == "completed"]
    accepted = sum(r.candidate_accepted for r in results)
    speedups = [s for r in results if (s := _num(r.speedup_ratio)) and s > 0]
    geomean = math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None
    mean_score = (sum(_num(r.score) or 0.0 for r in judged) / len(judged)) if judged else None
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<style>{STYLE}</style></head>
<body>
<h1>{_e(title)}</h1>
<p class="summary"><span>{len(results)} tasks</span><span>{len(judged)} judged</span>
<span>{accepted} accepted</span><span>geomean speedup {_fmt(geomean)}</span>
<span>mean score {_fmt(mean_score, '.4f')}</span></p>
<h2>Speedup per task (95% CI; red: not accepted; lines at 1.0x and 1.05x)</h2>
{speedup_plot(results)}
<div class="plots"><div><h2>Scores</h2>{score_histogram(results)}</div>
<div><h2>Statuses</h2>{status_plot(results)}</div>
<div><h2>Agent cost against speedup</h2>{cost_plot(results)}</div></div>
<h2>Tasks (click a column to sort)</h2>
<table id="tasks"><thead><tr>{''.join(f'<th>{_e(c)}</th>' for c in COLUMNS)}</tr></thead>
<tbody>
{task_rows(results)}
</tbody></table>
<h2>Timed cases and failures</h2>
{case_sections(results)}
<script>{sort_script(COLUMNS.index('speedup'))}</script>
</body></html>
"""


def write(results: Sequence[TaskResult], reports_dir: Path, title: str) -> Path:
    reports_dir.mkdir(parents=True, exist_ok=True)
    path = reports_dir / REPORT_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(results, title), encoding="utf-8")
    tmp.replace(path)
    return path


@hookimpl
def aka_report(run_dir: Path, results: list[TaskResult], reports_dir: Path) -> list[Path]:
    return [write(results, reports_dir, f"aka run {Path(run_dir).name}")]
