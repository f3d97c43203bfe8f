"""Builds before the GPU lock (``prebuild``): a native side's library built by a GPU-less,
confined process into the side runner's own cache, under the key the runner looks up; a failing
or hanging builder is recorded, never the side's failure."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from aka_core.evaluation import prebuild, sandbox
from aka_core.evaluation.judge import Judge
from aka_core.evaluation.request import EvaluationRequest, SideRef
from aka_core.kits import native

REPO = Path(__file__).resolve().parents[2]
RMS = REPO / "tests" / "solutions" / "cuda2cuda" / "rms_norm"

def _nvcc() -> str | None:
    try:
        from aka_backend_cuda.toolchain import find_nvcc
    except ImportError:
        return None
    return find_nvcc()


needs_nvcc = pytest.mark.skipif(_nvcc() is None, reason="nvcc is not installed")


def judge_for(tmp_path: Path, candidate: Path, *, restored: bool = False,
              task_id: str = "cuda2cuda/rms_norm", backend: str = "cuda",
              factory: str = "aka_backend_cuda:CudaBackend", entry: str = "kernel.py:rms_norm",
              reference: str = "reference.py:rms_norm_reference") -> Judge:
    """A judge holding the GPU's place (device "cuda") with a candidate side, as far as
    ``start_builders`` reads it; its runners are not started (the builders are what is tested)."""
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.kits.python_backend import PythonBackend
    from aka_core.plugin.host import PluginHost

    task = REPO / "tasks" / task_id
    loaded = load_task(task, task_id, PluginHost())
    request = EvaluationRequest(
        task_id=task_id, backend=backend, reference=SideRef(root=str(task), ref=reference),
        inputs=SideRef(root=str(task), ref="inputs.py:make_inputs"),
        baseline=SideRef(root=str(task), ref=entry),
        candidate=SideRef(root=str(candidate), ref=entry),
        cases=loaded.cases, tolerance={}, device="cuda", confinement="best_effort")
    judge = Judge(request, channel=None)  # type: ignore[arg-type]
    judge.scratch = tmp_path / "judge"
    judge.device = "cuda"
    judge.make_inputs = PythonBackend().load_callable(task, "inputs.py:make_inputs",
                                                      "aka_test_inputs_" + task_id.replace("/", "_"))
    scratch = judge.scratch / "candidate"
    (scratch / "cache").mkdir(parents=True)
    judge.runners = {"candidate": None}  # type: ignore[dict-item]
    judge.side_scratch = {"candidate": scratch}
    judge.kernel_caches = {"candidate": (None, scratch / "cache", {"used": restored})}
    judge.side_init = {"candidate": {"device": "cuda", "backend": factory, "root": str(candidate),
                                     "ref": entry, "package": "aka_side_candidate", "env": {}}}
    return judge


GELU = REPO / "tests" / "solutions" / "triton2triton" / "gelu"


def triton_gelu_judge(tmp_path: Path) -> Judge:
    """``judge_for`` a Triton side: the stored gelu solution."""
    return judge_for(tmp_path, GELU, task_id="triton2triton/gelu", backend="triton",
                     factory="aka_backend_triton:TritonBackend", entry="kernel.py:gelu",
                     reference="reference.py:gelu_reference")


def warm_candidate(judge: Judge, tmp_path: Path, side_root: Path,
                   confinement: str = "required") -> Any:
    """Builders started ahead by a warm judge (its runners killed: not what is tested, and this
    host may have no GPU), ``judge`` wired to its candidate side staged from ``side_root``."""
    from aka_core.evaluation import warm as warm_module
    from aka_core.evaluation.judge import runner_environment

    profile = warm_module.WarmProfile(device="cuda", confinement=confinement)
    warm = warm_module.WarmRunners(profile, tmp_path / "warm", runner_environment,
                                   str(tmp_path / "warm-log"))
    for runner in warm.runners.values():
        runner.kill()
    judge.warm = warm
    scratch = warm.scratch("candidate")
    judge.side_scratch = {"candidate": scratch}
    judge.kernel_caches = {"candidate": (None, scratch / "cache", {"used": False})}
    judge.side_init["candidate"]["root"] = warm.stage_side("candidate", str(side_root))
    return warm


def runner_key(candidate: Path, architecture: str) -> str:
    """The key the side's runner computes when its module's ``load`` builds for ``architecture``."""
    from aka_backend_cuda.toolchain import build_command, find_nvcc

    nvcc = find_nvcc()
    assert nvcc is not None
    sources = native.resolve_sources(["kernel.cu"], candidate)
    command = build_command(nvcc, sources, architecture, [])
    return native.content_key(native.tool_identity(nvcc), [command], sources)


@needs_nvcc
def test_the_builder_builds_into_the_runners_cache_under_the_runners_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    candidate = tmp_path / "candidate"
    shutil.copytree(RMS, candidate)
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = judge_for(tmp_path, candidate)
    judge.finish_builders(judge.start_builders())
    record = judge.result["prebuild"]["candidate"]
    assert record["ran"] and record["outcome"] == "built", record
    entry = judge.side_scratch["candidate"] / "cache" / "builds" / "cuda" / runner_key(candidate, "sm_90")
    assert (entry / ".complete").is_file() and (entry / "lib.so").is_file()
    # Nothing else written where the side's runner would look, and the builder's own scratch
    # is its own.
    assert [p.name for p in (judge.side_scratch["candidate"] / "cache" / "builds" / "cuda").iterdir()
            if p.is_dir()] == [entry.name]
    assert (judge.scratch / "candidate-builder").is_dir()


@needs_nvcc
def test_a_candidate_that_does_not_build_is_left_to_its_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    candidate = tmp_path / "candidate"
    shutil.copytree(RMS, candidate)
    (candidate / "kernel.cu").write_text("this is not CUDA\n")
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = judge_for(tmp_path, candidate)
    judge.finish_builders(judge.start_builders())  # raises nothing: the runner reports builds
    record = judge.result["prebuild"]["candidate"]
    assert record["outcome"] == "failed" and "kernel.cu" in record["reason"], record


def test_a_builder_that_hangs_is_stopped_at_the_compile_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text("import time\ntime.sleep(3600)\n")
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = judge_for(tmp_path, candidate)
    import attrs

    judge.req = attrs.evolve(judge.req, timeouts=attrs.evolve(judge.req.timeouts,
                                                              compile_seconds=3))
    started = time.monotonic()
    builders = judge.start_builders()
    process = builders["candidate"].process
    judge.finish_builders(builders)
    assert time.monotonic() - started < 30
    assert judge.result["prebuild"]["candidate"]["outcome"] == "timeout"
    assert process.proc.poll() is not None  # killed, not left running


def test_restored_kernels_or_no_gpu_lock_mean_no_builder(tmp_path: Path) -> None:
    judge = judge_for(tmp_path, RMS, restored=True)
    assert judge.start_builders() == {}
    assert "restored" in judge.result["prebuild"]["candidate"]["reason"]
    assert prebuild.wanted("import", "cpu", False, {}) == "no GPU lock to build before"
    assert prebuild.wanted("call", "cuda", True, {}) == "no GPU lock to build before"
    assert "nothing ahead" in str(prebuild.wanted(None, "cuda", False, {}))
    assert prebuild.wanted("import", "cuda", False, {"used": False}) is None
    assert prebuild.wanted("call", "cuda", False, {}) is None


def test_a_builders_sandbox_has_no_gpu_and_its_environment_sees_none() -> None:
    spec = sandbox.build_spec(scratch=Path("/tmp"), read=[], protected=[], required=False).to_json()
    spec["devices"] = [*spec["devices"], "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm",
                       "/dev/kfd", "/dev/dri/renderD128"]
    devices = prebuild.builder_spec(spec)["devices"]
    assert not [d for d in devices if d.startswith(("/dev/nvidia", "/dev/kfd", "/dev/dri"))]
    assert "/dev/null" in devices
    assert prebuild.NO_GPU["CUDA_VISIBLE_DEVICES"] == ""


@needs_nvcc
@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="this host cannot confine (no Landlock)")
def test_a_builder_writes_only_its_sides_build_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An adversarial candidate, run by its builder before the lock: it tries to plant files in
    the baseline's scratch (its build cache), in its own runner's scratch outside the build
    cache, and in the task's folder; only its own build cache takes a write."""
    candidate = tmp_path / "candidate"
    shutil.copytree(RMS, candidate)
    judge_root = tmp_path / "judge"
    targets = [judge_root / "baseline" / "cache" / "builds" / "planted",
               judge_root / "candidate" / "home" / "planted",
               REPO / "tasks" / "cuda2cuda" / "rms_norm" / "planted",
               judge_root / "candidate" / "cache" / "builds" / "planted"]
    (judge_root / "baseline" / "cache" / "builds").mkdir(parents=True)
    (judge_root / "candidate" / "home").mkdir(parents=True)
    source = (candidate / "kernel.py").read_text()
    attack = "".join(f"try:\n    open({str(t)!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
                     for t in targets)
    (candidate / "kernel.py").write_text(attack + source)
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = judge_for(tmp_path, candidate)
    judge.finish_builders(judge.start_builders())
    record = judge.result["prebuild"]["candidate"]
    assert record["outcome"] == "built" and record["confined"], record
    assert [t.exists() for t in targets] == [False, False, False, True]


@needs_nvcc
@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="this host cannot confine (no Landlock)")
def test_the_red_teams_planted_baseline_build_is_not_planted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/redteam/exploits/plant_a_slow_baseline_build, run by its builder (the GPU red team
    runs it through the whole judge): the baseline's build cache stays empty."""
    exploit = REPO / "tests" / "redteam" / "exploits" / "plant_a_slow_baseline_build"
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = judge_for(tmp_path, exploit)
    baseline_builds = judge.scratch / "baseline" / "cache" / "builds"
    baseline_builds.mkdir(parents=True)
    judge.finish_builders(judge.start_builders())
    assert judge.result["prebuild"]["candidate"]["outcome"] == "built"
    assert not any(baseline_builds.iterdir())
    assert not (judge.scratch / "baseline" / "cache" / "triton").exists()
    key = runner_key(exploit, "sm_90")
    assert (judge.side_scratch["candidate"] / "cache" / "builds" / "cuda" / key / "lib.so").is_file()


@needs_nvcc
@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="this host cannot confine (no Landlock)")
def test_a_builder_started_ahead_cannot_plant_the_baselines_build_either(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same exploit through a builder started with a warm judge, confined before the
    request: the baseline runner's cache (of the same warm judge) stays empty."""
    exploit = REPO / "tests" / "redteam" / "exploits" / "plant_a_slow_baseline_build"
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = judge_for(tmp_path, exploit)
    warm = warm_candidate(judge, tmp_path, exploit)
    try:
        scratch = warm.scratch("candidate")
        baseline_cache = warm.scratch("baseline") / "cache"
        (baseline_cache / "builds").mkdir(parents=True)
        judge.finish_builders(judge.start_builders())
        record = judge.result["prebuild"]["candidate"]
        assert record["started_ahead"] and record["outcome"] == "built", record
        assert record["confined"], record
        assert not any((baseline_cache / "builds").iterdir())
        assert not (baseline_cache / "triton").exists()
        assert any((scratch / "cache" / "builds" / "cuda").iterdir())  # its own: built there
    finally:
        warm.discard()


DAEMON_SCRIPT = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from aka_core.evaluation import prebuild, sides
from test_prebuild import judge_for

sides.become_subreaper()  # as the judge is
prebuild.gpu_architecture = lambda: "sm_90"
tmp, candidate = Path({tmp!r}), Path({candidate!r})
judge = judge_for(tmp, candidate)
judge.finish_builders(judge.start_builders())
pid = int((tmp / "judge" / "candidate-builder" / "daemon.pid").read_text())
time.sleep(0.2)
try:
    os.kill(pid, 0)
    alive = Path(f"/proc/{{pid}}/stat").read_text().split()[2] != "Z"
except ProcessLookupError:
    alive = False
print("alive" if alive else "gone", judge.result["prebuild"]["candidate"]["outcome"])
"""


def test_a_builders_daemon_does_not_outlive_it(tmp_path: Path) -> None:
    """A side whose import, in its builder, leaves a daemon in a session of its own (double fork)
    and then fails: once the builders are done, nothing of it is left below the judge."""
    import subprocess
    import sys

    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        open('daemon.pid', 'w').write(str(os.getpid()))  # its scratch\n"
        "        time.sleep(3600)\n"
        "    os._exit(0)\n"
        "time.sleep(1)\n"
        "raise RuntimeError('no build here')\n")
    script = DAEMON_SCRIPT.format(tests=str(Path(__file__).parent), tmp=str(tmp_path),
                                  candidate=str(candidate))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.stdout.split() == ["gone", "failed"], done.stdout + done.stderr[-3000:]


def test_a_triton_builder_compiles_every_case_for_the_gpu_into_the_runners_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``call`` kind: the side's function called on meta tensors of each case's shapes,
    Triton's driver naming sm_90 and launching nothing: cubins for sm_90 land in the side
    runner's Triton cache, and nothing ran (meta tensors have no memory)."""
    pytest.importorskip("triton")
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = triton_gelu_judge(tmp_path)
    judge.finish_builders(judge.start_builders())
    record = judge.result["prebuild"]["candidate"]
    assert record["outcome"] == "built" and record["confined"], record
    assert record["calls"] == len(judge.cases) and record["calls_failed"] == 0, record
    cubins = list((judge.side_scratch["candidate"] / "cache" / "triton").rglob("*.cubin"))
    assert cubins, "no kernel compiled ahead"
    described = next(p for p in cubins[0].parent.glob("*.json") if not p.name.startswith("__grp__"))
    target = json.loads(described.read_text())["target"]
    assert target["arch"] == 90 and target["backend"] == "cuda"


def test_inputs_factories_give_shapes_without_memory_or_are_skipped() -> None:
    from aka_core.builtin.operator_tasks import load_task
    from aka_core.kits.python_backend import PythonBackend
    from aka_core.plugin.host import PluginHost

    for task_id, expect_all in (("triton2triton/gelu", True), ("torch2triton/moe_grouped_gemm", False)):
        task = load_task(REPO / "tasks" / task_id, task_id, PluginHost())
        make = PythonBackend().load_callable(task.root, "inputs.py:make_inputs",
                                             "aka_test_shapes_" + task_id.replace("/", "_"))
        seeds = {c.name: [7] for c in task.cases}
        calls, skipped = prebuild.meta_inputs(make, task.cases, seeds, "cpu")
        if expect_all:
            assert len(calls) == len(task.cases) and not skipped
            shape = calls[0]["x"]["meta"]
            assert shape["dtype"] == "bfloat16" and len(shape["shape"]) == 2
        else:  # its factory counts rows per expert from the data (bincount): runner compiles
            assert not calls and skipped == [c.name for c in task.cases]


def test_meta_inputs_decode_to_meta_tensors_and_bad_ones_are_refused() -> None:
    import torch

    from aka_core.evaluation import protocol

    decoded = protocol.decode_inputs_cpu(protocol.encode_inputs_meta(
        {"x": torch.empty(3, 5, dtype=torch.bfloat16), "eps": 1e-6}))
    assert decoded["x"].device.type == "meta" and tuple(decoded["x"].shape) == (3, 5)
    assert decoded["x"].dtype == torch.bfloat16 and decoded["eps"] == 1e-6
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_inputs_cpu({"x": {"meta": {"dtype": "bfloat16", "shape": [-1]}}})
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_inputs_cpu({"x": {"meta": {"dtype": "object", "shape": [1]}}})


def test_a_builder_started_ahead_builds_the_side_it_is_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge started before its request (``warm``) starts a builder per side too: confined
    with the GPU hidden, it waits; given the side, it compiles every case for the GPU into the
    side runner's cache, as a builder started with the request does. The one no side needs is
    killed."""
    pytest.importorskip("triton")
    monkeypatch.setattr(prebuild, "gpu_architecture", lambda: "sm_90")
    judge = triton_gelu_judge(tmp_path)
    warm = warm_candidate(judge, tmp_path, GELU, confinement="best_effort")
    try:
        scratch = warm.scratch("candidate")
        builders = dict(warm.builders)
        assert set(builders) == {"baseline", "candidate"}
        assert all(warm.builder_specs[s]["devices"] == prebuild.builder_spec(
            warm.builder_specs[s])["devices"] for s in builders)  # no GPU device file
        judge.finish_builders(judge.start_builders())
        record = judge.result["prebuild"]["candidate"]
        assert record["started_ahead"] and record["outcome"] == "built", record
        assert record["calls"] == len(judge.cases) and record["calls_failed"] == 0, record
        assert list((scratch / "cache" / "triton").rglob("*.cubin")), "nothing compiled ahead"
        assert not warm.builders and builders["baseline"].dead  # not needed: killed
        assert builders["candidate"].dead  # killed once it built
    finally:
        warm.discard()
