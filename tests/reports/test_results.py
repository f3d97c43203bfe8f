"""Reading and writing task results and run directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from aka_core.errors import AkaError
from aka_core.run.results import (
    agent_cost_path,
    load_run,
    read_task_result,
    task_result_path,
    write_task_result,
)


def test_paths_keep_task_id_folders(tmp_path: Path) -> None:
    assert task_result_path(tmp_path, "triton2triton/gelu") == (
        tmp_path / "triton2triton" / "gelu" / "task_result.yaml")
    assert agent_cost_path(tmp_path, "triton2triton/vllm/rms") == (
        tmp_path / "agent_costs" / "triton2triton__vllm__rms.json")


@pytest.mark.parametrize("bad", ["../escape", "/abs/task", "a//b", "a/./b", ""])
def test_task_ids_that_escape_the_run_dir_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(AkaError, match="invalid task id"):
        task_result_path(tmp_path, bad)


def test_write_then_read_round_trips(tmp_path: Path, build_result) -> None:
    result = build_result("triton2triton/gelu", speedup=2.0, ci=(1.9, 2.1), input_tokens=10)
    path = write_task_result(tmp_path, result)
    assert path == task_result_path(tmp_path, "triton2triton/gelu")
    assert read_task_result(path) == result
    assert not list(path.parent.glob(".*.tmp"))  # the atomic write left no temp file


def test_corrupt_yaml_names_the_file(tmp_path: Path, build_result) -> None:
    path = write_task_result(tmp_path, build_result("triton2triton/gelu"))
    path.write_text("task_id: [unclosed\nstatus: completed\n", encoding="utf-8")
    with pytest.raises(AkaError) as info:
        read_task_result(path)
    assert str(path) in str(info.value)
    assert "not valid YAML" in str(info.value)


def test_wrong_field_type_names_file_and_field(tmp_path: Path, build_result) -> None:
    path = write_task_result(tmp_path, build_result("triton2triton/gelu"))
    path.write_text(path.read_text().replace("status: completed", "status: finished", 1))
    with pytest.raises(AkaError) as info:
        read_task_result(path)
    message = str(info.value)
    assert str(path) in message and "status" in message


def test_a_non_mapping_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t" / "task_result.yaml"
    path.parent.mkdir()
    path.write_text("- just\n- a list\n")
    with pytest.raises(AkaError, match="must be a mapping"):
        read_task_result(path)


def test_load_run_reads_results_and_lists_missing(build_run, build_result) -> None:
    run_dir = build_run("run_1", [build_result("triton2triton/gelu", speedup=1.5)],
                        extra_task_ids=["torch2triton/gemm"])
    record = load_run(run_dir)
    assert record.task_ids == ("triton2triton/gelu", "torch2triton/gemm")
    assert list(record.results) == ["triton2triton/gelu"]
    assert record.results["triton2triton/gelu"].speedup_ratio == 1.5
    assert record.missing_task_ids == ("torch2triton/gemm",)
    assert record.run_yaml["aka_version"] == "0.1.0"


def test_load_run_names_a_corrupt_result(build_run, build_result) -> None:
    run_dir = build_run("run_1", [build_result("a/x"), build_result("b/y")])
    bad = task_result_path(run_dir, "b/y")
    bad.write_text("{{{{", encoding="utf-8")
    with pytest.raises(AkaError) as info:
        load_run(run_dir)
    assert str(bad) in str(info.value)


def test_load_run_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(AkaError, match=r"no run\.yaml"):
        load_run(tmp_path)
    with pytest.raises(AkaError, match="not found"):
        load_run(tmp_path / "nope")


def test_load_run_refuses_a_result_under_another_task_id(build_run, build_result) -> None:
    run_dir = build_run("run_1", [build_result("a/x")], extra_task_ids=["a/y"])
    moved = task_result_path(run_dir, "a/y")
    moved.parent.mkdir(parents=True)
    moved.write_text(task_result_path(run_dir, "a/x").read_text())
    with pytest.raises(AkaError, match="belongs to 'a/y'"):
        load_run(run_dir)
