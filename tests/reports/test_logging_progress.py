"""Logging (JSON lines with bound context, stderr only, log file) and the run progress bar."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from rich.console import Console

from aka_core.errors import AkaError
from aka_core.logging_setup import (
    bind_context,
    bound_context,
    clear_context,
    configure_logging,
    get_logger,
    reset_logging,
)
from aka_core.run.progress import RunProgress


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    reset_logging()
    clear_context()
    yield
    clear_context()
    reset_logging()


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_json_lines_carry_bound_context_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_output=True, force=True)
    bind_context(run="run_1", task="triton2triton/gelu", agent="codex")
    log = get_logger("aka.test")
    log.info("task started", attempt=1)
    log.warning("slow")
    out, err = capsys.readouterr()
    assert out == ""
    events = _json_lines(err)
    assert [e["event"] for e in events] == ["task started", "slow"]
    for event in events:
        assert (event["run"], event["task"], event["agent"]) == (
            "run_1", "triton2triton/gelu", "codex")
    assert events[0]["attempt"] == 1 and events[0]["level"] == "info"
    assert events[0]["logger"] == "aka.test" and "timestamp" in events[0]


def test_bound_context_is_scoped(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_output=True, force=True)
    with bound_context(task="a/b"):
        structlog.get_logger().info("inside")
    structlog.get_logger().info("outside")
    inside, outside = _json_lines(capsys.readouterr().err)
    assert inside["task"] == "a/b" and "task" not in outside


def test_configuring_twice_keeps_the_first_unless_forced(
        capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_output=True)
    configure_logging(json_output=False)  # ignored: already configured
    structlog.get_logger().info("still json")
    assert _json_lines(capsys.readouterr().err)[0]["event"] == "still json"
    configure_logging(json_output=False, force=True)
    structlog.get_logger().info("now readable")
    err = capsys.readouterr().err
    assert "now readable" in err and not err.lstrip().startswith("{")


def test_level_filters_and_bad_level_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json_output=True, level="warning", force=True)
    structlog.get_logger().info("hidden")
    structlog.get_logger().error("shown")
    assert [e["event"] for e in _json_lines(capsys.readouterr().err)] == ["shown"]
    with pytest.raises(AkaError, match="choose one of debug"):
        configure_logging(level="loud", force=True)


def test_log_file_gets_json_while_console_is_readable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_file = tmp_path / "logs" / "aka.jsonl"
    configure_logging(json_output=False, log_file=log_file, force=True)
    bind_context(run="run_9")
    log = get_logger()
    log.info("hello", n=2)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    err = capsys.readouterr().err
    assert "hello" in err
    events = _json_lines(log_file.read_text())
    assert events[0]["event"] == "hello" and events[0]["run"] == "run_9" and events[0]["n"] == 2
    assert "ValueError: boom" in events[1]["exception"]
    reset_logging()  # closes the file; appending resumes on the next configuration
    configure_logging(json_output=True, log_file=log_file, force=True)
    get_logger().info("again")
    assert len(_json_lines(log_file.read_text())) == 3


def test_progress_is_a_no_op_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with RunProgress(["a/x", "a/y"]) as progress:  # pytest's stderr is not a terminal
        assert not progress.enabled
        progress.start_task("a/x")
        progress.finish_task("a/x", "completed", 0.5)
    assert capsys.readouterr().err == ""
    assert not RunProgress(["a/x"], enabled=None).enabled


def test_progress_prints_finished_tasks_when_enabled() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120)
    with RunProgress(["a/x", "a/y"], enabled=True, console=console) as progress:
        progress.start_task("a/x")
        progress.start_task("a/y")
        progress.finish_task("a/x", "completed", 0.475)
        progress.finish_task("a/y", "error", None)
    text = buf.getvalue()
    assert "a/x  score 0.475" in text
    assert "error  a/y  score -" in text
    assert "2/2" in text
