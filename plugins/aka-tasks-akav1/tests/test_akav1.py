"""aka-v1 tasks end to end on the CPU: a task in the original AKA format written here (pure
Python, so its commands run anywhere), loaded by the format, evaluated by its own commands."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from aka_tasks_akav1 import AkaV1Format, aka_register_tasks

from aka_core.plugin import ConfigError, PluginHost, TaskFormatSpec
from aka_core.testing import TaskFormatContract

SLOW = "def scale(xs):\n    out = []\n    for x in xs:\n        out.append(2 * x)\n    return out\n"
FAST = "def scale(xs):\n    return [2 * x for x in xs]\n"
WRONG = "def scale(xs):\n    return [3 * x for x in xs]\n"
BROKEN = "def scale(xs)\n    return xs\n"

RUNNER = '''
import json, pathlib, py_compile, sys, time
sys.path.insert(0, "src")
mode = sys.argv[sys.argv.index("--mode") + 1]
if mode == "compile":
    py_compile.compile("src/kernel.py", doraise=True)
elif mode == "correctness":
    from kernel import scale
    assert scale([1, 2, 3]) == [2, 4, 6], "wrong result"
else:
    from kernel import scale
    xs = list(range(20000))
    start = time.perf_counter()
    for _ in range(20):
        scale(xs)
    out = pathlib.Path("build")
    out.mkdir(exist_ok=True)
    (out / "performance_report.json").write_text(json.dumps(
        {"time_ms": (time.perf_counter() - start) * 1000 / 20}))
'''


def write_task(root: Path, **extra: object) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "scripts").mkdir()
    (root / "src" / "kernel.py").write_text(SLOW)
    (root / "scripts" / "task_runner.py").write_text(RUNNER)
    config = {
        "source_file_path": ["src/kernel.py"], "target_kernel_functions": ["scale"],
        "compile_command": ["python3 scripts/task_runner.py --mode compile"],
        "correctness_command": ["python3 scripts/task_runner.py --mode correctness"],
        "performance_command": ["python3 scripts/task_runner.py --mode performance"],
        "task_type": "triton2triton",
        "prompt": {"source_code": None, "instructions": None, "cheatsheet": None},
        "aka": {"performance_report": "build/performance_report.json", "cpu": True}, **extra}
    (root / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    return root


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return write_task(tmp_path / "tasks" / "akav1" / "scale")


class TestAkaV1Contract(TaskFormatContract):
    @pytest.fixture
    def record(self) -> TaskFormatSpec:
        return aka_register_tasks()[0]

    @pytest.fixture
    def task_folder(self, task_dir: Path) -> Path:
        return task_dir


def aka_eval(task_dir: Path, candidate: str, tmp_path: Path) -> dict:
    cand = tmp_path / f"cand-{abs(hash(candidate))}" / "src"
    cand.mkdir(parents=True)
    (cand / "kernel.py").write_text(candidate)
    done = subprocess.run([sys.executable, "-m", "aka_core.cli", "eval", str(task_dir),
                           "--candidate", str(cand.parent), "--device", "cpu", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_faster_candidate_passes_by_the_tasks_own_commands_and_says_so(
        task_dir: Path, tmp_path: Path) -> None:
    result = aka_eval(task_dir, FAST, tmp_path)
    ev = result["evaluation"]
    assert ev["trust"] == "harness" and "judge's guarantees do not apply" in ev["trust_note"]
    assert result["pass_compilation"] is True and result["pass_correctness"] is True
    assert ev["confinement"]["confined"] is True
    gates = {g["name"]: g for g in result["acceptance"]["gates"]}
    assert gates["judged_by_the_task"]["passed"] is True
    assert ev["performance"]["measured"] is False  # no GPU: not timed


@pytest.mark.parametrize("source, kind", [(WRONG, "correctness"), (BROKEN, "compile")])
def test_a_wrong_or_broken_candidate_fails_where_its_command_fails(
        task_dir: Path, tmp_path: Path, source: str, kind: str) -> None:
    result = aka_eval(task_dir, source, tmp_path)
    failure = result["evaluation"]["failure"]
    assert failure["kind"] == kind and result["candidate_accepted"] is False
    assert "failed (exit" in failure["message"]


def test_timing_reads_both_sides_reports(task_dir: Path, tmp_path: Path) -> None:
    """The timing path on the CPU (the commands are pure Python): the baseline's report from a
    copy of the task, the candidate's from its workspace, the speedup their ratio."""
    from aka_core.testing import copy_task, harness

    task = AkaV1Format().load(task_dir, "akav1/scale")
    workspace, baseline, logs = (tmp_path / n for n in ("workspace", "baseline", "logs"))
    copy_task(task, workspace)
    copy_task(task, baseline)
    logs.mkdir()
    (workspace / "src" / "kernel.py").write_text(FAST)
    record = harness.evaluate(task, workspace, baseline, logs, device="cuda",
                              measure_performance=True, protected=[str(tmp_path / "tasks")],
                              confinement="required")
    assert "failure" not in record, record.get("failure")
    perf = record["performance"]
    case = perf["cases"][0]
    assert perf["measured"] and perf["speedup"] == pytest.approx(
        case["baseline_median_ms"] / case["candidate_median_ms"])
    assert [s["side"] for s in record["steps"]] == [
        "candidate", "candidate", "baseline", "baseline", "candidate"]


def test_a_candidate_cannot_read_the_tasks_folder_from_its_commands(task_dir: Path,
                                                                     tmp_path: Path) -> None:
    """Commands run confined: the original task folder (protected) is out of reach."""
    peek = FAST + textwrap.dedent(f"""
        import pathlib
        try:
            pathlib.Path({str(task_dir / "config.yaml")!r}).read_text()
            LEAK = True
        except OSError:
            LEAK = False
        if LEAK:
            def scale(xs):
                return []
    """)
    result = aka_eval(task_dir, peek, tmp_path)
    assert result["pass_correctness"] is True, result["evaluation"].get("failure")


def test_bad_configs_name_the_field(tmp_path: Path) -> None:
    fmt = AkaV1Format()
    bad = write_task(tmp_path / "a", performance_command="run.sh", aka={"cpu": True})
    with pytest.raises(ConfigError, match=r"aka\.performance_report"):
        fmt.load(bad, "x/a")
    bad = write_task(tmp_path / "b", source_file_path=["../outside.py"])
    with pytest.raises(ConfigError, match="not a file inside"):
        fmt.load(bad, "x/b")
    bad = write_task(tmp_path / "c", correctness_command=[""])
    with pytest.raises(ConfigError, match="correctness_command"):
        fmt.load(bad, "x/c")
    bad = write_task(tmp_path / "d", timeout=3)
    with pytest.raises(ConfigError, match="unknown field"):
        fmt.load(bad, "x/d")


def test_the_format_is_registered() -> None:
    assert PluginHost().get("task_format", "aka-v1").record.name == "aka-v1"
