"""``aka smoke`` reports, for each installed backend, whether this host can build and run it."""

from __future__ import annotations

from typing import Any

from aka_core.commands.smoke import render, runtime_checks
from aka_core.gpus import gpu_model


def facts(**backends: dict[str, Any]) -> dict[str, Any]:
    return {"python": "3.11.7", "aka": "0.1.0", "plugins": {"backend": sorted(backends)},
            "torch": "2.11.0+cu130", "packages": {"triton": "3.6.0"},
            "gpu": {"name": "NVIDIA H200", "architecture": "sm_90", "count": 1},
            "tools": {"cc": "/usr/bin/cc"}, "python_headers": True, "backends": backends}


CUDA_RUNS = {"build": True, "run": True, "vendors": ["nvidia"], "detail": "nvcc 13.0; runs"}
HIP_BUILDS = {"build": True, "run": False, "vendors": ["amd"], "detail": "clang 19; no AMD GPU"}
CUDA_NO_NVCC = {"build": False, "run": False, "vendors": ["nvidia"], "detail": "nvcc not found"}


def by_name(checks: list[Any]) -> dict[str, Any]:
    return {c.name: c for c in checks}


def test_each_backend_gets_a_line_saying_build_and_run() -> None:
    checks = by_name(runtime_checks(facts(cuda=CUDA_RUNS, hip=HIP_BUILDS), gpu_model("H200")))
    assert checks["backend:cuda"].ok
    assert checks["backend:cuda"].detail.startswith("builds and runs: nvcc 13.0")
    # An AMD-only backend that cannot run on an NVIDIA target is information, not a failure.
    assert checks["backend:hip"].ok
    assert checks["backend:hip"].detail.startswith("builds, cannot run here: clang 19")


def test_a_backend_the_target_needs_but_cannot_run_fails() -> None:
    checks = by_name(runtime_checks(facts(cuda=CUDA_NO_NVCC), gpu_model("H200")))
    assert not checks["backend:cuda"].ok
    assert "cannot build here: nvcc not found" in checks["backend:cuda"].detail
    assert "need it to run" in checks["backend:cuda"].detail
    assert "1 check(s) failed" in render(list(checks.values()))


def test_on_a_cpu_target_backends_are_reported_never_failed() -> None:
    cpu = facts(cuda=CUDA_NO_NVCC, hip=HIP_BUILDS)
    cpu["gpu"] = None
    checks = by_name(runtime_checks(cpu, gpu_model("cpu")))
    assert checks["backend:cuda"].ok and checks["backend:hip"].ok
    assert "cannot build here" in checks["backend:cuda"].detail
    # Not a failure, but not "ok" either: the line says "note".
    lines = render(list(checks.values())).splitlines()
    assert any(line.startswith("note") and "backend:cuda" in line for line in lines)
    assert any(line.startswith("ok") and "backend:hip" in line for line in lines)


def test_the_real_host_reports_every_installed_backend() -> None:
    from aka_core.commands.smoke import runtime_facts
    from aka_core.plugin.host import PluginHost

    host = PluginHost()
    found = runtime_facts(host)["backends"]
    assert set(found) == set(host.names("backend"))
    assert all(isinstance(r["build"], bool) and r["detail"] for r in found.values())
