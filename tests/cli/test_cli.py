"""The ``aka`` command as a user meets it: output, exit status and error messages.

Most commands run in-process through ``aka_core.cli.main`` (same parser, same code paths, without
paying for a new interpreter each time); ``aka run`` runs as a real subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aka_core import api
from aka_core.plugin.host import PluginHost
from aka_core.testing.fixtures import write_task
from aka_core.yamlio import dump_yaml

REPO = Path(__file__).resolve().parents[2]
KINDS = {"task_format", "agent", "backend", "scorer", "executor"}

CORRECT_KERNEL = "import torch\n\n\ndef scale_add(x, y, alpha):\n    return torch.add(x, y, alpha=alpha)\n"
WRONG_KERNEL = "def scale_add(x, y, alpha):\n    return x - alpha * y\n"

Aka = Callable[..., tuple[int, str, str]]


@pytest.fixture
def aka(aka_cli: Aka) -> Aka:
    """``aka(*args) -> (exit status, stdout, stderr)``, in-process (``aka_cli``)."""
    return aka_cli


def write_config(path: Path, agent: dict[str, Any], tasks: list[str] | None = None) -> Path:
    path.write_text(dump_yaml({"agent": agent, "tasks": tasks or ["demo"],
                               "target_gpu_model": "cpu"}), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- plugins, validate


def test_plugins_json_lists_every_kind_with_builtins_marked(aka: Aka) -> None:
    code, out, _ = aka("plugins", "--json")

    assert code == 0
    data = json.loads(out)
    plugins = {(p["kind"], p["name"]): p for p in data["plugins"]}
    assert {kind for kind, _ in plugins} == KINDS | {"observer"}
    assert plugins[("observer", "html_report")]["distribution"] == "aka-report-html"
    assert plugins[("observer", "html_report")]["description"] == "implements aka_report"
    for key in (("task_format", "operator"), ("backend", "python"), ("executor", "local"),
                ("executor", "local-parallel")):
        assert plugins[key]["builtin"] is True, key
        assert plugins[key]["distribution"] == "aka-core (builtin)"
    for key, dist in ((("agent", "noop"), "aka-agent-noop"), (("agent", "replay"), "aka-agent-replay"),
                      (("backend", "triton"), "aka-backend-triton"),
                      (("scorer", "speedup"), "aka-scorer-speedup")):
        assert plugins[key]["builtin"] is False, key
        assert (plugins[key]["distribution"], bool(plugins[key]["version"])) == (dist, True)
    assert data["load_errors"] == []


def test_validate_quickstart_config_passes(aka: Aka) -> None:
    code, out, _ = aka("validate", REPO / "configs" / "quickstart.yaml")

    assert code == 0, out
    assert out.startswith("PASS")


def test_misspelled_key_exits_2_with_file_line_field_and_suggestion(
    aka: Aka, tmp_path: Path
) -> None:
    config = tmp_path / "typo.yaml"
    config.write_text("agent:\n  template: noop\n  timout_seconds: 60\ntasks: [demo]\n"
                      "target_gpu_model: cpu\n", encoding="utf-8")
    expected = f"{config}:3: agent.timout_seconds"

    code, out, _ = aka("validate", config)
    assert code == 2
    assert expected in out and "did you mean 'timeout_seconds'" in out

    code, out, err = aka("run", config, "--output-root", tmp_path / "out")
    assert code == 2
    assert expected in err and "did you mean 'timeout_seconds'" in err
    assert not (tmp_path / "out").exists(), "a bad config must not create a run"


def test_unknown_agent_names_the_available_agents_and_exits_2(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    make_task()
    config = write_config(tmp_path / "unknown.yaml", {"template": "codexx"})

    code, _, err = aka("run", config, "--output-root", tmp_path / "out")

    assert code == 2
    assert "no agent named 'codexx'" in err
    available = err.split("available:", 1)[1]
    assert "noop" in available and "replay" in available
    assert f"{config}:2: agent.template" in err


# --------------------------------------------------------------------------- tasks, eval


def test_tasks_lists_tasks_with_skip_reasons_for_the_target(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    make_task("demo/runs")
    make_task("demo/needs_gpu", requires={"cpu_interpreter": False})

    code, out, _ = aka("tasks", "--tasks-dir", tmp_path / "tasks", "--target", "cpu")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("demo/")}
    assert lines["demo/runs"].rstrip().endswith("yes")
    assert "skip: the task needs a GPU (requires.cpu_interpreter is false)" in lines[
        "demo/needs_gpu"]

    code, out, _ = aka("tasks", "--tasks-dir", tmp_path / "tasks", "--target", "cpu", "--json")
    rows = {r["task"]: r for r in json.loads(out)["tasks"]}
    assert (rows["demo/runs"]["runs"], rows["demo/runs"]["skip_reason"]) == (True, None)
    assert rows["demo/needs_gpu"]["runs"] is False


def test_tasks_on_a_gpu_target_counts_the_tasks_validated_there(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    make_task("demo/ran", validated_on=[{"device": "NVIDIA H200", "date": "2026-12-02",
                                         "mode": "run", "note": "1.4x"}])
    make_task("demo/interpreted", validated_on=[{"device": "cpu", "date": "2026-12-02",
                                                 "mode": "interpreter"}])
    code, out, _ = aka("tasks", "--tasks-dir", tmp_path / "tasks", "--target", "H200")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("demo/")}
    assert lines["demo/ran"].rstrip().endswith("2026-12-02")
    assert lines["demo/interpreted"].rstrip().endswith("-")
    assert "2 tasks, 2 run on H200, 1 validated on it" in out
    code, out, _ = aka("tasks", "--tasks-dir", tmp_path / "tasks", "--target", "H200", "--json")
    rows = {r["task"]: r for r in json.loads(out)["tasks"]}
    assert rows["demo/ran"]["validated"]["date"] == "2026-12-02"
    assert rows["demo/interpreted"]["validated"] is None


def test_eval_json_reports_a_correct_candidate(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    task = make_task()
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(CORRECT_KERNEL, encoding="utf-8")

    code, out, _ = aka("eval", task, "--candidate", candidate, "--device", "cpu", "--json")

    assert code == 0
    data = json.loads(out)
    assert data["task_id"] == "demo/scale_add"
    assert (data["pass_compilation"], data["pass_correctness"]) == (True, True)
    assert data["candidate_accepted"] is True
    assert data["speedup_ratio"] is None and data["score"] == 0.0
    assert data["evaluation"]["performance"]["measured"] is False


def test_eval_summary_says_why_a_wrong_candidate_is_rejected(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    task = make_task()
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(WRONG_KERNEL, encoding="utf-8")

    code, out, _ = aka("eval", task, "--candidate", candidate, "--device", "cpu")

    assert code == 0
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert fields["compiled"].strip() == "True"
    assert fields["correct"].strip() == "False"
    assert "differs from the reference on case tiny" in fields["accepted"]


def test_eval_of_a_folder_without_the_editable_files_is_an_error(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    task = make_task()
    (tmp_path / "empty").mkdir()

    code, _, err = aka("eval", task, "--candidate", tmp_path / "empty", "--device", "cpu")

    assert code == 2
    assert "holds none of the task's editable files (kernel.py)" in err


def test_eval_of_a_file_or_a_missing_path_is_a_usage_error(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    task = make_task()
    (tmp_path / "kernel.py").write_text(CORRECT_KERNEL)

    code, _, err = aka("eval", task, "--candidate", tmp_path / "kernel.py", "--device", "cpu")
    assert code == 2 and "is a file; --candidate takes the folder" in err
    code, _, err = aka("eval", task, "--candidate", tmp_path / "nope", "--device", "cpu")
    assert code == 2 and "does not exist" in err
    code, _, err = aka("eval", tmp_path / "no-task", "--candidate", tmp_path, "--device", "cpu")
    assert code == 2 and "no task folder at" in err


def test_validate_of_a_folder_without_any_task_fails(aka: Aka, tmp_path: Path) -> None:
    code, out, _ = aka("validate", tmp_path)

    assert code == 2
    assert "no task.yaml here or in any folder below" in out


def test_validate_run_of_a_tasks_folder_passes_on_cpu(
    aka: Aka, tmp_path: Path, make_task: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_task()
    monkeypatch.chdir(tmp_path)  # a relative folder, as a user types it

    code, out, _ = aka("validate", "--run", "--device", "cpu", "tasks")

    assert code == 0, out
    assert out.splitlines()[0].split() == ["PASS", "demo/scale_add"]
    assert "PASS  baseline_matches_reference" in out


# --------------------------------------------------------------------------- report, compare


class TwoRuns:
    def __init__(self, a: Path, b: Path):
        self.a, self.b = a, b


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> TwoRuns:
    """Run A: ``aka run --run-suffix control`` (a real process) with the noop agent.
    Run B: the replay agent delivering a wrong kernel. One task each."""
    root = tmp_path_factory.mktemp("cli_runs")
    write_task(root / "tasks", "demo/scale_add")
    solutions = root / "solutions" / "demo" / "scale_add"
    solutions.mkdir(parents=True)
    (solutions / "kernel.py").write_text(WRONG_KERNEL, encoding="utf-8")
    config_a = write_config(root / "a.yaml", {"template": "noop"})
    config_b = write_config(root / "b.yaml", {"template": "replay",
                                              "options": {"source": str(root / "solutions")}})
    done = subprocess.run(
        [sys.executable, "-m", "aka_core.cli", "run", str(config_a), "--output-root",
         str(root / "out"), "--run-suffix", "control", "--no-progress"],
        cwd=root, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run_a = Path(done.stdout.strip().splitlines()[-1])
    run_b = api.run(config_b, output_root=root / "out", host=PluginHost()).run_dir
    return TwoRuns(run_a, run_b)


def test_run_prints_the_run_directory_named_with_the_suffix(two_runs: TwoRuns) -> None:
    assert two_runs.a.is_dir()
    assert two_runs.a.parent.name == "workspace_cpu_noop"
    assert two_runs.a.name.startswith("run_") and two_runs.a.name.endswith("_control")
    assert (two_runs.a / "demo" / "scale_add" / "task_result.yaml").is_file()
    assert (two_runs.a / "logs" / "aka.jsonl").is_file(), "the run's own log"


def test_report_regenerates_and_prints_a_runs_reports(aka: Aka, two_runs: TwoRuns) -> None:
    reports = two_runs.a / "reports"
    for path in reports.iterdir():
        path.unlink()

    code, out, _ = aka("report", two_runs.a)

    assert code == 0
    # report.html: the aka-report-html plugin, installed with the others
    assert sorted(p.name for p in reports.iterdir()) == ["report.html", "report.txt",
                                                         "summary.csv", "summary.json"]
    row = next(line for line in out.splitlines() if line.startswith("demo/scale_add"))
    assert row.split()[1:6] == ["completed", "completed", "yes", "yes", "yes"]

    code, out, _ = aka("report", two_runs.a, "--json")
    (task,) = json.loads(out)["tasks"]
    assert (task["task_id"], task["pass_correctness"]) == ("demo/scale_add", True)


def test_compare_two_runs_task_by_task(aka: Aka, two_runs: TwoRuns) -> None:
    code, out, _ = aka("compare", two_runs.a, two_runs.b)

    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("demo/scale_add"))
    assert row.split()[-2:] == ["1/1", "0/1"], "correct A, correct B"
    assert "A better on 1" in out

    code, out, _ = aka("compare", two_runs.a, two_runs.b, "--json")
    (task,) = json.loads(out)["tasks"]
    assert task["correctness"] == "A better"
    assert (task["a"]["correct_runs"], task["b"]["correct_runs"]) == (1, 0)


def test_report_of_a_folder_that_is_not_a_run_is_an_error(aka: Aka, tmp_path: Path) -> None:
    code, _, err = aka("report", tmp_path)
    assert code != 0
    assert "not an aka run directory" in err
