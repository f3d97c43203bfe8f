"""The pieces of a parallel run: resources in the config, slots, visibility, claims."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aka_core.builtin.parallel import (
    Slot,
    TaskQueue,
    claim_next,
    needs_workers,
    plan_slots,
    process_alive,
    visibility_environment,
)
from aka_core.cli import main
from aka_core.errors import ConfigError
from aka_core.models import ResourcesConfig
from aka_core.run import execute
from aka_core.run.config import load_run_config

# --------------------------------------------------------------------------- config


@pytest.fixture
def write_config(tmp_path: Path, make_task: Callable[..., Path]) -> Callable[[str], Path]:
    """``write_config(resources_yaml)``: a run config whose resources section starts on line 4."""
    make_task("demo/a")

    def write(resources: str, target: str = "cpu") -> Path:
        path = tmp_path / "run_config.yaml"
        path.write_text(f"agent: {{template: noop}}\ntasks: [demo]\ntarget_gpu_model: {target}\n"
                        f"resources:\n{resources}", encoding="utf-8")
        return path

    return write


def aka_run_error(config: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["run", str(config), "--output-root", str(config.parent / "out"), "--no-progress"])
    assert code == 2
    assert not (config.parent / "out").exists(), "no run directory for an invalid config"
    return capsys.readouterr().err


def test_gpus_and_gpu_groups_together_fail_naming_file_and_line(
    write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config("  gpus: [0, 1]\n  gpu_groups: [[0, 1], [2, 3]]\n")
    err = aka_run_error(config, capsys)
    assert f"{config}:6: resources: gpus and gpu_groups are mutually exclusive" in err
    assert "keep one" in err


def test_a_gpu_in_two_groups_fails_naming_the_group(
    write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config("  gpu_groups:\n    - [0, 1]\n    - [1, 2]\n")
    err = aka_run_error(config, capsys)
    assert f"{config}:7: resources.gpu_groups[1]: GPU 1 is already in group 0" in err


@pytest.mark.parametrize(("resources", "line", "message"), [
    ("  gpus: [0, -1]\n", 5, "must be at least 0"),
    ("  gpus: [2, 2]\n", 5, "has duplicate items"),
    ("  workers_per_gpu: 0\n", 5, "must be at least 1"),
    ("  vendor: intel\n", 5, "'intel' is not allowed"),
])
def test_invalid_resources_are_schema_errors_with_lines(
    write_config: Callable[[str], Path], resources: str, line: int, message: str
) -> None:
    config = write_config(resources)
    with pytest.raises(ConfigError) as excinfo:
        load_run_config(config)
    assert f"{config}:{line}: " in str(excinfo.value)
    assert message in str(excinfo.value)


def test_listed_gpus_must_exist_on_the_host(
    write_config: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    host_gpu = {"name": "NVIDIA H200", "vendor": "nvidia", "architecture": "sm_90", "count": 2}
    monkeypatch.setattr(execute, "probe", lambda: {"torch": "2", "gpu": host_gpu})
    config = load_run_config(write_config("  gpus: [0, 1]\n", target="H200"))
    assert execute.choose_device(config) == "cuda"

    path = write_config("  gpus: [0, 1, 3]\n", target="H200")
    with pytest.raises(ConfigError) as excinfo:
        execute.choose_device(load_run_config(path))
    assert f"{path}:5: resources.gpus: GPU id(s) [3] do not exist" in str(excinfo.value)


# --------------------------------------------------------------------------- slots


def test_slots_per_gpu_per_group_and_per_worker() -> None:
    assert plan_slots(ResourcesConfig(gpus=(0, 1, 2))) == [
        Slot(worker=0, devices=(0,)), Slot(worker=1, devices=(1,)), Slot(worker=2, devices=(2,))]
    assert [s.devices for s in plan_slots(ResourcesConfig(gpu_groups=((0, 1), (2, 3))))] == [
        (0, 1), (2, 3)]
    # Round robin: the first workers use distinct GPUs.
    assert [s.devices for s in plan_slots(ResourcesConfig(gpus=(4, 5), workers_per_gpu=2))] == [
        (4,), (5,), (4,), (5,)]
    assert plan_slots(ResourcesConfig()) == [Slot(worker=0, devices=())]


def test_which_runs_use_workers(write_config: Callable[[str], Path]) -> None:
    def uses_workers(resources: str, executor: str = "") -> bool:
        return needs_workers(load_run_config(write_config(resources + executor)))

    assert uses_workers("  gpus: [0, 1]\n")
    assert uses_workers("  gpus: [3]\n"), "a single listed GPU is honoured too"
    assert uses_workers("  workers_per_gpu: 2\n")
    assert not uses_workers("  workers_per_gpu: 1\n")
    assert not uses_workers("  gpus: [0, 1]\n", "executor: {name: docker}\n")


def test_resources_choose_between_the_local_executors(
    write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    def chosen(resources: str, executor: str = "") -> str:
        return execute.executor_name(load_run_config(write_config(resources + executor)))

    assert chosen("  gpus: [0, 1]\n") == "local-parallel"
    assert chosen("  gpus: [3]\n") == "local-parallel"
    assert chosen("  workers_per_gpu: 1\n") == "local"
    assert chosen("  gpus: [0, 1]\n", "executor: {name: docker}\n") == "docker"
    config = write_config("  gpus: [0]\nexecutor: {name: local-parallel}\n")
    err = aka_run_error(config, capsys)
    assert (f"{config}:6: executor.name: executor 'local-parallel' is chosen by resources, "
            "not by name") in err


@pytest.mark.parametrize(("vendor", "environ", "devices", "expected"), [
    ("nvidia", {}, (1,), {"CUDA_VISIBLE_DEVICES": "1"}),
    ("nvidia", {"CUDA_VISIBLE_DEVICES": "4,5,6"}, (0, 2), {"CUDA_VISIBLE_DEVICES": "4,6"}),
    ("nvidia", {"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"}, (1,), {"CUDA_VISIBLE_DEVICES": "GPU-b"}),
    ("amd", {}, (2, 3), {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0,1",
                         "CUDA_VISIBLE_DEVICES": "0,1"}),
    ("amd", {"ROCR_VISIBLE_DEVICES": "4,5,6,7", "HIP_VISIBLE_DEVICES": "1,3"}, (1,),
     {"ROCR_VISIBLE_DEVICES": "7", "HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0"}),
    ("none", {}, (0, 1), dict.fromkeys(
        ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"), "0,1")),
    ("nvidia", {"CUDA_VISIBLE_DEVICES": "3"}, (), {}),
])
def test_visibility_variables(vendor: str, environ: dict[str, str], devices: tuple[int, ...],
                              expected: dict[str, str]) -> None:
    assert visibility_environment(devices, vendor, environ) == expected


def test_ids_beyond_what_aka_sees_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"GPU id\(s\) \[2\].*sees only 2 GPU"):
        visibility_environment((2,), "nvidia", {"CUDA_VISIBLE_DEVICES": "4,5"})


# --------------------------------------------------------------------------- claims


def test_a_task_is_claimed_once_and_a_released_claim_is_kept(tmp_path: Path) -> None:
    queue = TaskQueue(tmp_path)
    first = queue.claim("demo/a", worker=0)
    assert first is not None and first.pid == os.getpid() and first.worker == 0
    assert queue.claim("demo/a", worker=1) is None
    assert queue.read("demo/a") == first
    assert not first.is_dead()

    record = queue.release(first)
    assert record.parent == queue.reclaimed_dir
    assert queue.read("demo/a") is None
    assert queue.claim("demo/a", worker=1) is not None
    assert list(queue.tmp_dir.iterdir()) == [], "no temporary claim is left behind"


def test_workers_take_tasks_in_order_skipping_claimed_and_finished(tmp_path: Path) -> None:
    queue = TaskQueue(tmp_path)
    (tmp_path / "demo" / "a").mkdir(parents=True)
    (tmp_path / "demo" / "a" / "task_result.yaml").write_text("status: completed\n")
    queue.claim("demo/b", worker=0)
    tasks = ["demo/a", "demo/b", "demo/c"]
    assert claim_next(queue, tmp_path, tasks, worker=1) == "demo/c"
    assert claim_next(queue, tmp_path, tasks, worker=1) is None


def test_a_claim_of_a_dead_or_reused_pid_is_dead(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid, None)
    own = Path(f"/proc/{os.getpid()}/stat")
    if own.is_file():  # a live pid with another start time is another process
        start = int(own.read_text().rsplit(")", 1)[1].split()[19])
        assert process_alive(os.getpid(), start)
        assert not process_alive(os.getpid(), start - 1)
