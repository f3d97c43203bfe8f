"""Tasks of compiled backends (cuda, hip, flydsl) on a host without their GPU: the evaluator builds
the baseline and the stored solution for the task's architecture, says nothing ran, and scores 0.

Skipped per backend when this host lacks its compiler (``aka smoke`` says which); CI installs
them all (scripts/ci/toolchains-setup.sh: nvcc, clang-19 with Debian's HIP headers, lld; flydsl
from PyPI) and sets AKA_REQUIRE_TOOLCHAINS=1, which turns those skips into failures.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aka_core import api
from aka_core.builtin.operator_tasks import load_task
from aka_core.commands.validate import validate_task
from aka_core.convert import unstructure
from aka_core.plugin.host import PluginHost

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
SOLUTIONS = ROOT / "tests" / "solutions"


def _compiled_task_ids() -> list[str]:
    host = PluginHost()
    ids = []
    for path in sorted(TASKS.rglob("task.yaml")):
        task_id = path.parent.relative_to(TASKS).as_posix()
        task = load_task(path.parent, task_id, host)
        if task.backend in ("cuda", "hip", "flydsl"):
            ids.append(task_id)
    return ids


TASK_IDS = _compiled_task_ids()


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return PluginHost()


def _require_builder(host: PluginHost, backend: str) -> None:
    ready = host.backend(backend).factory().readiness()
    if not ready.build:
        reason = f"the {backend} backend cannot build here: {ready.detail}"
        if os.environ.get("AKA_REQUIRE_TOOLCHAINS") == "1":  # CI installed them: a real failure
            pytest.fail(f"AKA_REQUIRE_TOOLCHAINS=1 but {reason}")
        pytest.skip(reason)


def test_compiled_families_are_present() -> None:
    families = {t.split("/")[0] for t in TASK_IDS}
    assert {"torch2cuda", "cuda2cuda", "hip2hip", "torch2hip", "torch2flydsl",
            "triton2flydsl"} <= families
    by_family = {f: sum(t.startswith(f + "/") for t in TASK_IDS) for f in families}
    assert by_family["torch2cuda"] + by_family["cuda2cuda"] >= 4
    assert by_family["hip2hip"] + by_family["torch2hip"] >= 4
    assert by_family["torch2flydsl"] + by_family["triton2flydsl"] >= 3


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_is_gpu_only_and_says_where_it_was_validated(task_id: str, host: PluginHost) -> None:
    task = load_task(TASKS / task_id, task_id, host)
    assert not task.requires.cpu_interpreter, "compiled tasks cannot run on the CPU"
    assert task.validated_on, "record where the task was validated (or only compiled)"
    assert (SOLUTIONS / task_id).is_dir(), "every task has a stored faster solution"


@pytest.mark.slow
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_baseline_builds_compile_only(task_id: str, host: PluginHost) -> None:
    task = load_task(TASKS / task_id, task_id, host)
    _require_builder(host, task.backend)
    report = validate_task(TASKS / task_id, task_id, host, run=True, device="cpu")
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert not failed, failed
    assert any(c["name"] == "baseline_builds" for c in report["checks"]), report["checks"]


@pytest.mark.slow
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_stored_solution_builds_compile_only(task_id: str, host: PluginHost) -> None:
    task = load_task(TASKS / task_id, task_id, host)
    _require_builder(host, task.backend)
    result = api.evaluate_candidate(TASKS / task_id, SOLUTIONS / task_id, device="cpu", host=host)
    assert result.status == "compile_only", result.acceptance
    assert result.pass_compilation is True, result.acceptance
    assert result.pass_correctness is None and not result.candidate_accepted
    assert result.score == 0.0 and result.speedup_ratio is None
    compiled = result.evaluation.compile_only
    assert compiled is not None
    record = unstructure(compiled)
    baseline_is_torch = task.family.startswith("torch2")
    assert record["built"] == (["candidate"] if baseline_is_torch else ["baseline", "candidate"])
    if baseline_is_torch:
        assert "baseline: PyTorch code, nothing to build" in record["note"]
    assert "not run" in record["note"]
    # The backend says what it built for the candidate: a library, a code object, for the arch.
    built = record["sides"]["candidate"]["built"]
    assert built, record["sides"]
    assert record["architecture"] in json.dumps(built) or task.backend == "cuda"
