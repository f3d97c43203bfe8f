"""The quick-start tasks give equivalent results under every executor: local (serial), local in
parallel over (fake) GPU ids, Slurm (a real one-node cluster) and docker (a real engine).

The engine-backed runs are skipped, saying why, when the engine is not up; with
AKA_REQUIRE_SLURM / AKA_REQUIRE_DOCKER set (CI starts both first) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aka_core.run.results import read_task_result
from aka_core.yamlio import dump_yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TASKS = ["triton2triton/gelu", "triton2triton/rms_norm"]
SOLUTIONS = REPO / "tests" / "solutions"
# The fields that say what happened; timings and paths differ between executors by nature.
FIELDS = ("status", "pass_compilation", "pass_correctness", "candidate_accepted", "speedup_ratio",
          "score")


def engine_problem(kind: str) -> str | None:
    if kind == "slurm":
        if shutil.which("sinfo") is None:
            return "Slurm is not installed (scripts/ci/slurm-setup.sh)"
        out = subprocess.run(["sinfo", "--noheader", "--format=%T"], capture_output=True,
                             text=True, timeout=20, check=False)
        return None if "idle" in out.stdout or "mixed" in out.stdout else (
            f"no Slurm node is up: {out.stdout.strip() or out.stderr.strip()}")
    if kind == "docker":
        if shutil.which("docker") is None:
            return "docker is not installed (scripts/ci/docker-setup.sh)"
        out = subprocess.run(["docker", "image", "inspect", "aka-ci:latest"],
                             capture_output=True, text=True, timeout=60, check=False)
        return None if out.returncode == 0 else f"no engine or no aka-ci image: {out.stderr[:200]}"
    return None


def run_with(executor: dict[str, Any], tmp_path: Path, **extra: Any) -> dict[str, tuple]:
    kind = executor["name"]
    problem = engine_problem(kind)
    if problem:
        if os.environ.get(f"AKA_REQUIRE_{kind.upper()}"):
            pytest.fail(f"AKA_REQUIRE_{kind.upper()} is set but {problem}")
        pytest.skip(problem)
    config = {
        "agent": {"template": "replay", "timeout_seconds": 600,
                  "options": {"source": str(SOLUTIONS)}},
        "tasks": TASKS, "target_gpu_model": "cpu", "tasks_directory": str(REPO / "tasks"),
        "executor": executor, **extra,
    }
    path = tmp_path / f"{kind}.yaml"
    path.write_text(dump_yaml(config), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "aka_core.cli", "run", str(path), "--output-root",
                          str(tmp_path / "runs"), "--no-progress"], capture_output=True,
                         text=True, timeout=1200, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = Path(out.stdout.strip().splitlines()[-1])
    results = {}
    for task in TASKS:
        result = read_task_result(run_dir / task / "task_result.yaml")
        results[task] = tuple(getattr(result, f) for f in FIELDS)
    return results


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    results = run_with({"name": "local"}, tmp_path_factory.mktemp("local"))
    for task, row in results.items():
        assert row[:4] == ("completed", True, True, True), (task, row)
    return results


def test_parallel_matches_local(local: dict[str, tuple], tmp_path: Path) -> None:
    assert run_with({"name": "local"}, tmp_path, resources={"gpus": [0, 1]}) == local


def test_slurm_matches_local(local: dict[str, tuple], tmp_path: Path) -> None:
    executor = {"name": "slurm", "options": {"partition": "debug", "poll_seconds": 1}}
    assert run_with(executor, tmp_path) == local


def test_docker_matches_local(local: dict[str, tuple], tmp_path: Path) -> None:
    executor = {"name": "docker", "options": {"image": "aka-ci:latest",
                                              "mounts": [str(SOLUTIONS)]}}
    assert run_with(executor, tmp_path) == local
