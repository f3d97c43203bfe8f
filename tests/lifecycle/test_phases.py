"""A task's agent and evaluation steps can run apart (``aka run-task --phase``), e.g. in two
containers, and give the same result as running them together."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aka_core.cli import main
from aka_core.plugin.host import PluginHost
from aka_core.run.execute import create_run
from aka_core.run.results import read_task_result
from aka_core.yamlio import dump_yaml


def test_agent_then_evaluate_gives_the_result_of_a_whole_run(
    make_task: Callable[..., Path], tmp_path: Path, capsys
) -> None:
    make_task("demo/scale_add")
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({"agent": {"template": "noop"}, "tasks": ["demo"],
                                 "target_gpu_model": "cpu"}), encoding="utf-8")
    run_dir = create_run(config, PluginHost(), output_root=tmp_path / "out")
    task = "demo/scale_add"

    assert main(["run-task", str(run_dir), task, "--phase", "evaluate"]) == 0
    assert capsys.readouterr().out.strip() == "error"  # no agent phase yet: a clear error result
    assert "run the agent phase first" in read_task_result(
        run_dir / task / "task_result.yaml").error

    assert main(["run-task", str(run_dir), task, "--phase", "agent"]) == 0
    assert capsys.readouterr().out.strip() == "agent_done"
    assert not (run_dir / task / "task_result.yaml").exists()  # the error attempt was set aside
    assert (run_dir / task / "agent_phase.json").is_file()

    assert main(["run-task", str(run_dir), task, "--phase", "evaluate"]) == 0
    assert capsys.readouterr().out.strip() == "completed"
    split = read_task_result(run_dir / task / "task_result.yaml")
    assert split.agent_execution.agent == "noop"
    assert (split.pass_compilation, split.pass_correctness, split.candidate_accepted) == (
        True, True, True)
    assert split.integrity.ok and split.integrity.evaluator_files_intact
