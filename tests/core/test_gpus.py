"""Target GPUs and the reasons a task is skipped on one."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from aka_core.errors import ConfigError
from aka_core.gpus import gpu_model, skip_reason
from aka_core.models import Case, Requirements, Task, Tolerance


def make_task(backend: str = "triton", **requires: object) -> Task:
    return Task(
        id="f/t", root=Path("."), format="operator", name="f/t", backend=backend, family="f",
        editable=("kernel.py",), entrypoint="kernel.py:f", reference="reference.py:f",
        baseline="kernel.py:f", inputs="inputs.py:f", cases=(Case(name="a"),),
        instructions="go", tolerance={"float32": Tolerance(rtol=1e-5)},
        requires=Requirements(**requires),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("name", "vendor", "arch", "capability"), [
    ("H100", "nvidia", "sm_90", 9.0),
    ("h200", "nvidia", "sm_90", 9.0),
    ("B200", "nvidia", "sm_100", 10.0),
    ("A100", "nvidia", "sm_80", 8.0),
    ("l40s", "nvidia", "sm_89", 8.9),
    ("RTX4090", "nvidia", "sm_89", 8.9),
    ("MI300X", "amd", "gfx942", None),
    ("mi325x", "amd", "gfx942", None),
    ("MI355X", "amd", "gfx950", None),
    ("gfx1201", "amd", "gfx1201", None),
    ("cpu", None, None, None),
])
def test_known_models(name: str, vendor: str | None, arch: str | None,
                      capability: float | None) -> None:
    model = gpu_model(name)
    assert (model.vendor, model.architecture, model.compute_capability) == (
        vendor, arch, capability)


def test_architectures_are_accepted_as_targets() -> None:
    assert attrs.astuple(gpu_model("sm_120"))[1:4] == ("nvidia", "sm_120", 12.0)
    assert gpu_model("sm_90a").compute_capability == 9.0
    assert gpu_model("gfx90a").vendor == "amd"


def test_unknown_model_names_the_known_ones_and_a_close_match() -> None:
    with pytest.raises(ConfigError) as info:
        gpu_model("H10")
    text = str(info.value)
    assert "unknown GPU model 'H10'" in text
    assert "did you mean 'H100'?" in text
    assert "MI300X" in text and "cpu" in text and "sm_90" in text


def test_portable_task_runs_on_both_vendors() -> None:
    task = make_task(vendors=("nvidia", "amd"))
    assert skip_reason(task, gpu_model("H100")) is None
    assert skip_reason(task, gpu_model("MI300X")) is None


def test_vendor_requirement() -> None:
    reason = skip_reason(make_task(vendors=("nvidia",)), gpu_model("MI300X"))
    assert reason == "the task requires vendor nvidia; the target MI300X is AMD"


def test_architecture_requirement() -> None:
    task = make_task(architectures=("sm_90", "sm_100"))
    assert skip_reason(task, gpu_model("H200")) is None
    assert skip_reason(task, gpu_model("A100")) == (
        "the task requires architecture sm_90, sm_100; the target A100 is sm_80")


def test_min_compute_capability_constrains_nvidia_targets() -> None:
    task = make_task(min_compute_capability=8.9)
    assert skip_reason(task, gpu_model("L40S")) is None
    assert "compute capability >= 8.9" in (skip_reason(task, gpu_model("A100")) or "")
    assert skip_reason(task, gpu_model("MI300X")) is None


def test_cpu_target_needs_the_interpreter() -> None:
    assert skip_reason(make_task(vendors=("nvidia",)), gpu_model("cpu")) is None
    reason = skip_reason(make_task(cpu_interpreter=False), gpu_model("cpu"))
    assert reason is not None and "needs a GPU" in reason


@pytest.mark.parametrize(("backend", "runs_on", "skipped_on"), [
    ("cuda", "H100", "MI300X"),
    ("hip", "MI300X", "H100"),
    ("flydsl", "MI355X", "B200"),
])
def test_vendor_specific_backends(backend: str, runs_on: str, skipped_on: str) -> None:
    from aka_core.plugin.host import PluginHost

    vendors = PluginHost().backend_vendors(backend)  # what the installed backend declares
    assert vendors, f"backend {backend!r} declares no vendor"
    task = make_task(backend=backend)
    assert skip_reason(task, gpu_model(runs_on), vendors) is None
    assert f"backend {backend!r} needs" in (skip_reason(task, gpu_model(skipped_on), vendors) or "")
    assert f"backend {backend!r} needs" in (skip_reason(task, gpu_model("cpu"), vendors) or "")


def test_portable_backends_run_on_every_vendor() -> None:
    from aka_core.plugin.host import PluginHost

    host = PluginHost()
    assert host.backend_vendors("triton") == host.backend_vendors("python") == ()
    assert host.backend_vendors("no-such-backend") == ()  # loading its task says what is missing
    task = make_task(backend="triton")
    for gpu in ("H100", "MI300X"):
        assert skip_reason(task, gpu_model(gpu), ()) is None
    both = skip_reason(task, gpu_model("cpu"), ("nvidia", "amd"))
    assert both is not None and "NVIDIA or AMD GPU" in both


def test_a_task_counts_as_validated_on_a_gpu_only_with_a_run_on_that_gpu() -> None:
    from aka_core.gpus import validation_on

    run = {"device": "NVIDIA H200", "date": "2026-12-02", "mode": "run", "note": "1.5x"}
    interpreted = {"device": "cpu", "date": "2026-12-01", "mode": "interpreter"}
    built = {"device": "NVIDIA H200", "date": "2026-12-01", "mode": "compile-only"}
    task = attrs.evolve(make_task(), validated_on=(interpreted, built, run))
    assert validation_on(task, gpu_model("H200")) == run
    assert validation_on(task, gpu_model("H100")) is None  # "H100" is not in "NVIDIA H200"
    assert validation_on(task, gpu_model("cpu")) is None
    assert validation_on(attrs.evolve(task, validated_on=(interpreted, built)),
                         gpu_model("H200")) is None
