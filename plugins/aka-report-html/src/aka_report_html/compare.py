"""A comparison of two runs (``aka compare A B --html FILE``) as one self-contained page: the
A/B speedup ratio of each task with its 95% CI, the aggregates with their CIs and p-values, fast_p
per side, the agents' costs, and the task table (sortable)."""

from __future__ import annotations

import json
import math
from typing import Any

from aka_report_html import STYLE, _e, _fmt, _log_axis, _num, sort_script

RATIO_COLORS = {"faster": "#2da44e", "slower": "#cf222e", "within noise": "#57606a", "n/a": "#8c959f"}


def ratio_plot(tasks: Any) -> str:
    rows = [(t.task_id, t.speedup_ratio, t.speedup_ratio_ci95 or (t.speedup_ratio, t.speedup_ratio),
             t.verdict) for t in tasks if _num(t.speedup_ratio)]
    if not rows:
        return "<p class='note'>No task has a speedup on both sides.</p>"
    rows.sort(key=lambda row: row[1])
    lo = min(0.8, min(r[2][0] for r in rows) * 0.95)
    hi = max(1.25, max(r[2][1] for r in rows) * 1.05)
    left, width, step, top = 260, 520, 22, 24
    height = top + step * len(rows) + 30

    def x(value: float) -> float:
        value = min(max(value, lo), hi)
        return left + width * (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))

    ticks = [t for t in (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0) if lo <= t <= hi]
    parts = [f"<svg class='plot' id='ratio-plot' width='{left + width + 20}' height='{height}' "
             "role='img' aria-label='A/B speedup ratio per task with 95% CI'>"]
    for tick in ticks or _log_axis(lo, hi):
        parts.append(f"<line x1='{x(tick):.1f}' y1='{top - 6}' x2='{x(tick):.1f}' "
                     f"y2='{height - 24}' stroke='#d0d7de'/><text x='{x(tick):.1f}' "
                     f"y='{height - 8}' text-anchor='middle'>{tick:g}</text>")
    parts.append(f"<line x1='{x(1.0):.1f}' y1='{top - 10}' x2='{x(1.0):.1f}' y2='{height - 24}' "
                 "stroke='#57606a'/>")
    for i, (task, ratio, ci, verdict) in enumerate(rows):
        y = top + i * step + step / 2
        color = RATIO_COLORS.get(verdict, "#57606a")
        parts.append(f"<text x='{left - 8}' y='{y + 4:.1f}' text-anchor='end'>{_e(task)}</text>"
                     f"<line x1='{x(ci[0]):.1f}' y1='{y:.1f}' x2='{x(ci[1]):.1f}' y2='{y:.1f}' "
                     f"stroke='{color}' stroke-opacity='0.5' stroke-width='3'/>"
                     f"<circle cx='{x(ratio):.1f}' cy='{y:.1f}' r='5' fill='{color}'><title>"
                     f"{_e(task)}: A/B {ratio:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] {_e(verdict)}"
                     "</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def _summary(s: Any, spec: str) -> str:
    if s is None or s.estimate is None:
        return "-"
    text = format(s.estimate, spec)
    if s.ci95:
        text += f" [{format(s.ci95[0], spec)}, {format(s.ci95[1], spec)}]"
    if s.p_value is not None:
        text += f", p = {s.p_value:.3g}"
    return text + f" ({s.tasks} tasks)"


COLUMNS = ("task", "score A", "score B", "delta", "speedup A", "speedup B", "A/B", "A/B 95% CI",
           "verdict", "correct A", "correct B")


def render(c: Any) -> str:
    agg = c.aggregates
    rows = []
    for t in c.tasks:
        ci = t.speedup_ratio_ci95
        cells = [(t.task_id, _e(t.task_id)), (t.a.mean_score, _fmt(t.a.mean_score, ".4f")),
                 (t.b.mean_score, _fmt(t.b.mean_score, ".4f")),
                 (t.score_delta, _fmt(t.score_delta, "+.4f")),
                 (_num(t.a.speedup), _fmt(t.a.speedup)), (_num(t.b.speedup), _fmt(t.b.speedup)),
                 (_num(t.speedup_ratio), _fmt(t.speedup_ratio)),
                 (_num(ci[0]) if ci else None, f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "-"),
                 (t.verdict, _e(t.verdict)), (t.a.correct_runs, f"{t.a.correct_runs}/{t.a.runs}"),
                 (t.b.correct_runs, f"{t.b.correct_runs}/{t.b.runs}")]
        rows.append("<tr>" + "".join(f"<td data-v='{_e(json.dumps(v))}'>{shown}</td>"
                                     for v, shown in cells) + "</tr>")
    fast = "".join(f"<tr><td>{_e(k)}</td><td>{_fmt(agg.fast_p_a.get(k), '.2f')}</td>"
                   f"<td>{_fmt(agg.fast_p_b.get(k), '.2f')}</td></tr>" for k in agg.fast_p_a)
    costs = (f"<p>agent cost per task: A ${_fmt(agg.cost_a.get('cost_per_task_usd'))}, "
             f"B ${_fmt(agg.cost_b.get('cost_per_task_usd'))}; per unit of score: "
             f"A ${_fmt(agg.cost_a.get('cost_per_score_usd'))}, "
             f"B ${_fmt(agg.cost_b.get('cost_per_score_usd'))}</p>"
             if agg.cost_a.get("runs_with_cost") or agg.cost_b.get("runs_with_cost") else
             "<p class='note'>No agent reported costs.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>aka compare</title>
<style>{STYLE}</style></head>
<body>
<h1>A: {_e(c.a.label)} &nbsp;vs&nbsp; B: {_e(c.b.label)}</h1>
<p class="summary"><span>{agg.common_tasks} tasks in both</span>
<span>{agg.faster} faster, {agg.slower} slower, {agg.within_noise} within noise</span>
<span>{agg.wins} wins, {agg.losses} losses, {agg.ties} ties on score</span></p>
<p>geometric mean of A/B: <b>{_summary(agg.speed, '.3f')}</b><br>
mean score A - B: <b>{_summary(agg.score, '+.4f')}</b><br>
<span class="note">CIs: bootstrap (per task from the stored timing samples where both sides have
them); p: two-sided Wilcoxon signed-rank over tasks.</span></p>
<h2>A/B speedup ratio per task (95% CI; green: A faster, red: A slower)</h2>
{ratio_plot(c.tasks)}
<div class="plots"><div><h2>fast_p</h2><table><tr><th>p</th><th>A</th><th>B</th></tr>{fast}</table>
</div><div><h2>Cost</h2>{costs}</div></div>
<h2>Tasks (click a column to sort)</h2>
<table id="tasks"><thead><tr>{''.join(f'<th>{_e(col)}</th>' for col in COLUMNS)}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<script>{sort_script(COLUMNS.index('A/B'))}</script>
</body></html>
"""
