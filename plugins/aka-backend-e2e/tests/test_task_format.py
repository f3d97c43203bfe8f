"""The e2e task format: which folders it claims, the Task it loads, and what the core does with
it without running anything (listing, static validation, the prompt, the workspace)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aka_backend_e2e import workload as wl
from aka_backend_e2e.kernels_api import BASELINE_TREE
from aka_backend_e2e.task_format import E2ETaskFormat

from aka_core.plugin import ConfigError, PluginHost, gpus
from aka_core.testing import build_prompt, check_and_restore, load_task, prepare_workspace

REPO = Path(__file__).resolve().parents[3]
WORKLOAD = """\
engine: builtin
model: {config: tiny, seed: 0}
weights_digest: sha256:%s
kernels: {entrypoints: [attention_decode, kv_write]}
cases:
  - {name: c1, input_len: [8, 16], output_len: [8, 8], requests: 4, max_concurrency: 2}
""" % ("ab" * 32)


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    root = tmp_path / "tasks" / "e2e" / "tiny_attention"
    root.mkdir(parents=True)
    (root / "workload.yaml").write_text(WORKLOAD)
    (root / "instructions.md").write_text("Make decode attention faster.\n")
    shutil.copytree(BASELINE_TREE, root / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    workload = wl.load_workload(root)
    (root / wl.LOCK_FILE).write_text(json.dumps(
        wl.expected_lock(root, workload, wl.pinned_weights(workload))))
    return root


def test_the_format_claims_workload_folders_without_a_task_yaml(task_dir: Path) -> None:
    fmt = E2ETaskFormat()
    assert fmt.is_task_dir(task_dir)
    assert not fmt.is_task_dir(task_dir / "kernels")
    (task_dir / "task.yaml").write_text("format: operator\n")
    assert not fmt.is_task_dir(task_dir), "a task.yaml makes it the operator format's folder"


def test_load_gives_an_e2e_task(task_dir: Path) -> None:
    task = load_task(task_dir, "e2e/tiny_attention", PluginHost())
    assert (task.format, task.backend, task.family) == ("e2e", "e2e", "e2e")
    assert task.editable == ("kernels/attention.py",)
    assert task.entrypoint == "kernels/attention.py:attention_decode"
    assert task.baseline_is_initial_candidate
    assert [c.name for c in task.cases] == ["c1"]
    assert task.requires.cpu_interpreter, "the tiny model is served on the CPU too"
    assert "Make decode attention faster." in task.instructions
    assert "attention_decode(q[B,Hq,D]" in task.instructions
    assert task.judging and "FP32 reference" in task.judging


def test_a_missing_entrypoint_or_a_changed_file_is_a_clear_error(task_dir: Path) -> None:
    (task_dir / "kernels" / "rotary.py").write_text("def rotate(q, k):\n    return q, k\n")
    with pytest.raises(ConfigError) as info:
        E2ETaskFormat().load(task_dir, "e2e/tiny_attention")
    assert "rotary.py" in str(info.value) and "defines no rotary()" in str(info.value)
    (task_dir / "kernels" / "rotary.py").write_text(
        "def rotary(q, k, positions, cos_sin):\n    return q, k\n")
    with pytest.raises(ConfigError) as info:
        E2ETaskFormat().load(task_dir, "e2e/tiny_attention")
    assert "kernels/rotary.py changed" in str(info.value)
    assert "python -m aka_backend_e2e.workload lock" in str(info.value)


def test_the_prompt_says_how_an_e2e_task_is_judged(task_dir: Path) -> None:
    task = load_task(task_dir, "e2e/tiny_attention", PluginHost())
    prompt = build_prompt(task, gpus.gpu_model("H200"))
    assert "Files you may edit: kernels/attention.py" in prompt
    assert "throughput" in prompt and "aka selfcheck" in prompt
    assert "inputs factory" not in prompt, "the operator task's wording does not apply"


def test_only_the_editable_kernel_file_may_change_in_the_workspace(task_dir: Path,
                                                                   tmp_path: Path) -> None:
    task = load_task(task_dir, "e2e/tiny_attention", PluginHost())
    workspace = tmp_path / "workspace"
    before = prepare_workspace(task, workspace)
    (workspace / "kernels" / "attention.py").write_text("# faster\n")
    (workspace / "kernels" / "norm.py").write_text("# not yours\n")
    (workspace / "workload.yaml").write_text("engine: builtin\n")
    report = check_and_restore(task, workspace, before)
    assert report.changed_files == ("kernels/attention.py",)
    assert report.restored_files == ("kernels/norm.py", "workload.yaml")
    assert (workspace / "workload.yaml").read_text() == WORKLOAD


def test_aka_tasks_and_static_validation(task_dir: Path) -> None:
    aka = [sys.executable, "-m", "aka_core.cli"]
    listed = subprocess.run([*aka, "tasks", "--tasks-dir", str(task_dir.parents[1]), "--json",
                             "--target", "cpu"], capture_output=True, text=True, check=True)
    (row,) = json.loads(listed.stdout)["tasks"]
    assert row["task"] == "e2e/tiny_attention" and row["backend"] == "e2e" and row["runs"]
    checked = subprocess.run([*aka, "validate", str(task_dir)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "PASS" in checked.stdout


@pytest.mark.parametrize("name", ["qwen3_norms", "qwen3_rotary", "qwen3_decode_attention",
                                  "qwen3_silu_mul"])
def test_the_shipped_tasks_load_and_match_their_locks(name: str) -> None:
    root = REPO / "tasks" / "e2e" / name
    if not root.is_dir():
        pytest.skip("the tasks live in the repository checkout")
    task = load_task(root, f"e2e/{name}", PluginHost())
    assert task.format == "e2e" and not task.requires.cpu_interpreter, "qwen3-0.6b needs a GPU"
    assert (root / "instructions.md").is_file() and (root / "NOTES.md").is_file()
