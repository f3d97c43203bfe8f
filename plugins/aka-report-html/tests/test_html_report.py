"""The HTML report: what it holds, that it is self-contained, and that it loads in a real
headless browser with no script error and its plots drawn (Chromium; CI installs it)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from aka_report_html import REPORT_FILE, aka_report, render

from aka_core.plugin import Acceptance, AgentExecution, AgentUsage, TaskResult


def result(task_id: str, speedup: float | None, *, accepted: bool = True, cost: float | None = 0.2,
           status: str = "completed", failure: dict | None = None) -> TaskResult:
    evaluation: dict = {}
    if speedup is not None:
        evaluation["performance"] = {"measured": True, "speedup": speedup,
                                     "ci95": [speedup * 0.98, speedup * 1.02], "cases": [
                                         {"case": "c1", "held_out": False, "method": "cuda_graph",
                                          "pairs": 10, "baseline_median_ms": 1.0,
                                          "candidate_median_ms": 1 / speedup, "speedup": speedup,
                                          "ci95": [speedup * 0.98, speedup * 1.02]}]}
    if failure:
        evaluation["failure"] = failure
    return TaskResult(
        task_id=task_id, status=status, family=task_id.split("/")[0], backend="triton",  # type: ignore[arg-type]
        duration_seconds=42.0, pass_compilation=True, pass_correctness=accepted,
        candidate_accepted=accepted, speedup_ratio=speedup,
        score=max(0.0, 1 - 1.05 / speedup) if accepted and speedup else 0.0,
        acceptance=Acceptance(accepted=accepted, reason="all gates passed" if accepted else "no"),
        agent_execution=AgentExecution(agent="codex", status="completed", duration_seconds=30.0,
                                       usage=AgentUsage(input_tokens=12000, output_tokens=800,
                                                        cost_usd=cost, turns=7)),
        evaluation=evaluation)


RESULTS = [result("triton2triton/gelu", 2.43), result("torch2cuda/silu_and_mul", 2.30),
           result("triton2triton/softmax", 1.50, cost=0.35),
           result("torch2triton/gemm_bias_gelu", 0.98),
           result("cuda2cuda/rms_norm", None, accepted=False, cost=None,
                  failure={"kind": "correctness", "message": "wrong <on> case c1 & more"}),
           TaskResult(task_id="hip2hip/x", status="skipped", skip_reason="requires gfx942")]


def test_the_report_holds_every_task_and_nothing_external(tmp_path: Path) -> None:
    paths = aka_report(tmp_path / "run_7", RESULTS, tmp_path / "reports")
    assert paths == [tmp_path / "reports" / REPORT_FILE]
    page = paths[0].read_text()
    for r in RESULTS:
        assert r.task_id in page
    assert "wrong &lt;on&gt; case c1 &amp; more" in page  # escaped
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page)  # no network
    assert page.count("<circle") >= 4 + 4  # speedup dots and cost points
    assert "geomean speedup" in page and "<title>aka run run_7</title>" in page


def test_an_empty_run_renders() -> None:
    page = render([], "empty")
    assert "No task measured a speedup" in page


def browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    return None


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r[i:i + 3]) for r in rows for i in range(0, stride, bpp)]


@pytest.mark.slow
@pytest.mark.skipif(browser() is None and not os.environ.get("AKA_REQUIRE_BROWSER"),
                    reason="no Chromium here (apt-get install chromium)")
def test_the_page_loads_in_headless_chromium_with_its_plots_drawn(tmp_path: Path) -> None:
    chromium = browser()
    assert chromium, "AKA_REQUIRE_BROWSER is set but no Chromium is installed"
    page = aka_report(tmp_path / "run", RESULTS, tmp_path)[0]
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1400"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-ready="1"' in body, body  # the script ran to its end
    assert 'data-errors=""' in body, body  # and nothing raised
    order = re.findall(r"<tr><td data-v=\"&quot;([^&]+)&quot;\"", dom)
    assert order[:2] == ["triton2triton/gelu", "torch2cuda/silu_and_mul"]  # sorted, fastest first
    shot = tmp_path / "shot.png"
    subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120, check=True)
    width, height, pixels = png_pixels(shot)
    assert (width, height) == (1280, 1400)
    dots = sum(1 for p in pixels if p == bytes((0x1F, 0x6F, 0xEB)))
    bars = sum(1 for p in pixels if p == bytes((0x82, 0x50, 0xDF)))
    assert dots > 200 and bars > 200, (dots, bars)  # the speedup dots and the score bars
