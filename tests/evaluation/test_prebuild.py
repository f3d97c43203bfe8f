"""Builds before the GPU lock (``prebuild``): a native side's library built by a GPU-less,
confined process into the side runner's own cache, under the key the runner looks up; a failing
or hanging builder is recorded, never the side's failure."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from aka_core.evaluation import prebuild, sandbox
from aka_core.evaluation.judge import Judge
from aka_core.evaluation.request import EvaluationRequest, SideRef
from aka_core.kits import native
from aka_core.models import Case

REPO = Path(__file__).resolve().parents[2]
RMS = REPO / "tests" / "solutions" / "cuda2cuda" / "rms_norm"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path(
    "/usr/local/cuda/bin/nvcc").exists(), reason="nvcc is not installed")


def judge_for(tmp_path: Path, candidate: Path, *, restored: bool = False) -> Judge:
    """A judge holding the GPU's place (device "cuda") with a candidate side, as far as
    ``start_builders`` reads it; its runners are not started (the builders are what is tested)."""
    task = REPO / "tasks" / "cuda2cuda" / "rms_norm"
    ref = SideRef(root=str(task), ref="reference.py:rms_norm_reference")
    request = EvaluationRequest(
        task_id="cuda2cuda/rms_norm", backend="cuda", reference=ref,
        inputs=SideRef(root=str(task), ref="inputs.py:make_inputs"),
        baseline=SideRef(root=str(task), ref="kernel.py:rms_norm"),
        candidate=SideRef(root=str(candidate), ref="kernel.py:rms_norm"),
        cases=(Case(name="a", params={}),), tolerance={}, device="cuda",
        confinement="best_effort")
    judge = Judge(request, channel=None)  # type: ignore[arg-type]
    judge.scratch = tmp_path / "judge"
    judge.device = "cuda"
    scratch = judge.scratch / "candidate"
    (scratch / "cache").mkdir(parents=True)
    judge.runners = {"candidate": None}  # type: ignore[dict-item]
    judge.side_scratch = {"candidate": scratch}
    judge.kernel_caches = {"candidate": (None, scratch / "cache", {"used": restored})}
    judge.side_init = {"candidate": {"device": "cuda", "backend": "aka_backend_cuda:CudaBackend",
                                     "root": str(candidate), "ref": "kernel.py:rms_norm",
                                     "package": "aka_side_candidate", "env": {}}}
    return judge


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
    assert prebuild.wanted(True, "cpu", False, {}) == "no GPU lock to build before"
    assert prebuild.wanted(True, "cuda", True, {}) == "no GPU lock to build before"
    assert "first call" in str(prebuild.wanted(False, "cuda", False, {}))
    assert prebuild.wanted(True, "cuda", False, {"used": False}) is None


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
    key = runner_key(exploit, "sm_90")
    assert (judge.side_scratch["candidate"] / "cache" / "builds" / "cuda" / key / "lib.so").is_file()


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
