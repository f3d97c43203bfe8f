"""``aka compare A B --html FILE``: the comparison as a page, loaded in headless Chromium."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from aka_report_html.compare import render

from aka_core.plugin import write_yaml_atomic
from aka_core.testing import cli_main, compare_runs, write_task_result

from .test_html_report import browser, result


def run(root: Path, name: str, factor: float) -> Path:
    results = [result(f"triton2triton/t{i}", s * factor, cost=0.3)
               for i, s in enumerate((1.3, 2.6, 1.7, 1.2))]
    run_dir = root / name
    write_yaml_atomic(run_dir / "run.yaml", {
        "config": {"agent": {"template": "replay"}}, "task_ids": [r.task_id for r in results],
        "plugins": {}, "host": {}, "created_at": "2026-12-01T00:00:00Z", "aka_version": "0.1.0"})
    for r in results:
        write_task_result(run_dir, r)
    return run_dir


def test_the_page_holds_the_verdicts_and_statistics(tmp_path: Path) -> None:
    a, b = run(tmp_path, "fast", 1.0), run(tmp_path, "slow", 1 / 1.1)
    page = render(compare_runs(a, b))
    assert "A: fast" in page and "B: slow" in page
    assert page.count("<circle") == 4 and "4 faster, 0 slower" in page
    assert "p = 0.125" in page  # 4 of 4 tasks the same sign
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)


def test_the_command_writes_it(tmp_path: Path, capsys) -> None:
    a, b = run(tmp_path, "fast", 1.0), run(tmp_path, "slow", 1 / 1.1)
    out = tmp_path / "cmp" / "compare.html"
    assert cli_main(["compare", str(a), str(b), "--html", str(out)]) == 0
    assert out.is_file() and str(out) in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(browser() is None and not os.environ.get("AKA_REQUIRE_BROWSER"),
                    reason="no Chromium here (apt-get install chromium)")
def test_it_loads_in_headless_chromium(tmp_path: Path) -> None:
    chromium = browser()
    assert chromium, "AKA_REQUIRE_BROWSER is set but no Chromium is installed"
    page = tmp_path / "compare.html"
    page.write_text(render(compare_runs(run(tmp_path, "a", 1.0), run(tmp_path, "b", 1 / 1.1))))
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-ready="1"' in body and 'data-errors=""' in body, body
