"""In-process policy agents, `aka selfcheck` inside a workspace, and `aka check-agents`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aka_core import api
from aka_core.cli import main
from aka_core.commands.selfcheck import selfcheck
from aka_core.kits.policy_agents import TaskView, policy_plugin
from aka_core.plugin.host import PluginHost
from aka_core.yamlio import dump_yaml

WRONG = "def scale_add(x, y, alpha):\n    return x - alpha * y\n"
FASTER = "def scale_add(x, y, alpha):\n    return y.mul(alpha).add_(x)\n"


def write_config(path: Path, template: str) -> Path:
    path.write_text(dump_yaml({"agent": {"template": template, "timeout_seconds": 60},
                               "tasks": ["demo"], "target_gpu_model": "cpu"}), encoding="utf-8")
    return path


def host_with(name: str, fn: Callable[[TaskView], dict[str, str]]) -> PluginHost:
    host = PluginHost()
    host.register(policy_plugin(name, fn))
    return host


@pytest.mark.slow  # 10-17 s: the fast tier stays under 3 minutes
def test_policy_output_is_evaluated_through_the_whole_lifecycle(
    make_task: Callable[..., Path], tmp_path: Path
) -> None:
    make_task("demo/scale_add")
    seen: list[TaskView] = []

    def policy(view: TaskView) -> dict[str, str]:
        seen.append(view)
        return {"kernel.py": FASTER, "reference.py": "# not editable: refused\n"}

    outcome = api.run(write_config(tmp_path / "run.yaml", "trainer-policy"),
                      output_root=tmp_path / "out", host=host_with("trainer-policy", policy))
    (result,) = outcome.results
    assert seen and seen[0].task_id == "demo/scale_add"
    assert set(seen[0].files) == {"kernel.py"} and "def scale_add" in seen[0].files["kernel.py"]
    assert "aka selfcheck" in seen[0].prompt
    assert result.agent_execution.status == "completed"
    assert "refused (not editable): reference.py" in result.agent_execution.message
    assert result.pass_correctness is True and result.candidate_accepted is True
    assert result.integrity.changed_files == ("kernel.py",)


def test_a_policy_that_raises_fails_only_its_agent_step(
    make_task: Callable[..., Path], tmp_path: Path
) -> None:
    make_task("demo/scale_add")

    def policy(view: TaskView) -> dict[str, str]:
        raise RuntimeError("sampling failed")

    (result,) = api.run(write_config(tmp_path / "run.yaml", "broken-policy"),
                        output_root=tmp_path / "out",
                        host=host_with("broken-policy", policy)).results
    assert result.agent_execution.status == "failed"
    assert "sampling failed" in result.agent_execution.message
    assert result.status == "completed" and result.pass_correctness is True  # the baseline


@pytest.mark.slow  # 10-17 s: the fast tier stays under 3 minutes
def test_selfcheck_in_a_workspace_sees_visible_cases_only(
    make_task: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_task("demo/scale_add")
    outcome = api.run(write_config(tmp_path / "run.yaml", "noop"), output_root=tmp_path / "out")
    workspace = outcome.run_dir / "demo" / "scale_add" / "workspace"
    assert "held_out_cases" not in (workspace / "task.yaml").read_text()

    result = selfcheck(workspace, PluginHost(), device="cpu")
    assert result["pass_correctness"] is True and result["advisory"] is True
    assert not any(c.held_out for c in result["evaluation"].correctness.checks)

    (workspace / "kernel.py").write_text(WRONG, encoding="utf-8")
    assert main(["selfcheck", str(workspace), "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "correct:  False" in out and "advisory" in out


def test_selfcheck_outside_a_workspace_says_what_to_do(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selfcheck", str(tmp_path)]) == 1
    assert "run `aka selfcheck` in a task workspace" in capsys.readouterr().err


def test_check_agents_reports_each_config(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tasks" / "demo").mkdir(parents=True)
    config = write_config(tmp_path / "run.yaml", "noop")
    assert main(["check-agents", str(config)]) == 0
    assert "noop           ready" in capsys.readouterr().out
