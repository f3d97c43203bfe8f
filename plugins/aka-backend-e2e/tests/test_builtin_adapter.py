"""The builtin adapter: the real confined engine process on the tiny model (CPU), and every fault
against a fake engine (``fake_engine.py``) that speaks the same pipe protocol."""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import time
from pathlib import Path

import attrs
import pytest
from aka_backend_e2e import measure
from aka_backend_e2e.adapters import builtin
from aka_backend_e2e.adapters.base import (
    CountCheckFailed,
    EngineCrashed,
    EngineFailure,
    EngineProtocolError,
    EngineSetupError,
    EngineTimeout,
    KernelLoadFailed,
)
from aka_backend_e2e.adapters.builtin import BuiltinAdapter, Timeouts
from aka_backend_e2e.workload import KernelsSpec, ModelSpec, Workload, WorkloadCase

FAKE = Path(__file__).resolve().parent / "fake_engine.py"
QUICK = Timeouts(confine=30.0, load=120.0, stall=1.5, generate=30.0, check=10.0, stop=1.0)
DECLARED = ("rms_norm", "fused_add_rms_norm")


def workload(config: str = "tiny") -> Workload:
    case = WorkloadCase(name="c", input_len=(3, 8), output_len=(3, 6), requests=5,
                        max_concurrency=2, warmup_requests=2)
    return Workload(engine="builtin", model=ModelSpec(config=config, seed=0),
                    kernels=KernelsSpec(entrypoints=DECLARED), cases=(case,))


@pytest.fixture
def tree(tmp_path):
    from aka_backend_e2e.kernels_api import BASELINE_TREE

    out = tmp_path / "cand" / "kernels"
    shutil.copytree(BASELINE_TREE, out, ignore=shutil.ignore_patterns("__pycache__"))
    return out


def fake_adapter(tmp_path: Path, mode: str = "ok", **options) -> BuiltinAdapter:
    env = {"FAKE_ENGINE_MODE": mode, **options.pop("env", {})}
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"fake")
    return BuiltinAdapter(weights=weights, weights_digest="sha256:fake", device="cpu",
                          timeouts=QUICK, command=[sys.executable, "-I", str(FAKE)],
                          extra_read=[str(FAKE)], env=env, scratch_root=tmp_path / "scratch",
                          **options)


def serve(adapter: BuiltinAdapter, tree: Path, tmp_path: Path, arm: str = "candidate",
          rate: float = math.inf, count: int = 5, max_concurrency: int | None = None):
    wl = workload()
    reqs = measure.case_requests(attrs.evolve(wl.cases[0], requests=count), 512, prompt_key="k")
    run = adapter.start(arm, tree, wl, wl.cases[0], tmp_path / "logs")
    try:
        return run.generate(reqs, rate, max_concurrency=max_concurrency), reqs, run
    finally:
        run.stop()


# --------------------------------------------------------------------------- the real engine


def test_the_real_engine_serves_confined(tmp_path, tree):
    pytest.importorskip("torch")
    from aka_backend_e2e import model, weights

    path, digest = weights.ensure_weights(model.config_by_name("tiny"), 0, tmp_path / "weights")
    core = max(os.sched_getaffinity(0))
    adapter = BuiltinAdapter(weights=path, weights_digest=digest, device="cpu", timeouts=QUICK,
                             env={"OMP_NUM_THREADS": "1"}, scratch_root=tmp_path / "scratch",
                             cpus=[core])
    wl = workload()
    reqs = measure.case_requests(wl.cases[0], 512, prompt_key="k")
    run = adapter.start("candidate", tree, wl, wl.cases[0], tmp_path / "logs")
    try:
        # Pinned from its first statement: every thread of the engine runs on the one core.
        for task in Path(f"/proc/{run.proc.pid}/task").iterdir():
            assert os.sched_getaffinity(int(task.name)) == {core}
        assert run.info["cpus"] == [core]
        if len(os.sched_getaffinity(0)) > 1:  # the judge's reader of its lines keeps off it
            assert core not in os.sched_getaffinity(run._reader.native_id)
        first = run.generate(reqs, math.inf)
        again = run.generate(reqs, 50.0)  # over time: 5 requests at 50 per second
    finally:
        run.stop()
    for result in (first, again):
        measure.check_counts(result, reqs)
        assert measure.throughput(result) > 0
    assert {r: first.requests[r].tokens for r in first.requests} == {
        r: again.requests[r].tokens for r in again.requests}  # greedy: the same tokens
    sent = sorted(r.sent for r in again.requests.values())
    assert sent[-1] - sent[0] >= 0.9 * measure.arrival_offsets(5, 50.0, 0)[-1]
    assert run.info["confinement"]["confined"] is True
    assert set(DECLARED) <= set(run.info["entrypoints_called"])
    from aka_backend_e2e.kernels_api import tree_digest

    assert run.info["kernel_digest"] == tree_digest(tree)
    assert run.proc.poll() is not None
    assert not run.scratch.exists()


def test_a_gpu_engine_gets_one_core_of_its_own(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert builtin.engine_cpus("cuda") == [3]
    assert builtin.engine_cpus("cpu") is None  # the tiny CPU model: its threads, unpinned
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # judges of other GPUs: other cores
    assert builtin.engine_cpus("cuda") == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # never core 0, the judge's last one
    assert builtin.engine_cpus("cuda") == [3]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5})
    assert builtin.engine_cpus("cuda") is None  # one core: nothing to set apart
    monkeypatch.setenv(builtin.CPUS_ENV, "[2]")  # the operator's choice, on any device
    assert builtin.engine_cpus("cpu") == [2]
    monkeypatch.setenv(builtin.CPUS_ENV, "two")
    with pytest.raises(EngineSetupError, match="a JSON list of CPU core numbers"):
        builtin.engine_cpus("cuda")


# --------------------------------------------------------------------------- the fake engine


def test_protocol_timestamps_and_the_sandbox(tmp_path, tree):
    secret = tree / "secret.txt"
    secret.write_text("the held-out answer")
    adapter = fake_adapter(tmp_path, protected=[str(secret)],
                           env={"FAKE_ENGINE_PROBE": str(secret)})
    result, reqs, run = serve(adapter, tree, tmp_path)
    measure.check_counts(result, reqs)
    engine = run.info["engine"]
    assert engine["probe"] == {"kernels": "allowed", "protected": "denied"}
    assert engine["load"]["slots"] == 2 and engine["load"]["max_len"] == 8 + 6
    assert engine["load"]["kernels"] == str(tree.resolve())
    assert run.info["confinement"]["confined"] is True
    for r in result.requests.values():
        assert r.sent <= r.token_times[0] <= r.token_times[-1] <= r.completed <= result.end


def test_requests_over_time_and_check(tmp_path, tree):
    adapter = fake_adapter(tmp_path)
    wl = workload()
    reqs = measure.case_requests(attrs.evolve(wl.cases[0], requests=4), 512, prompt_key="k")
    run = adapter.start("candidate", tree, wl, wl.cases[0], tmp_path / "logs")
    try:
        result = run.generate(reqs, 20.0)
        assert run.check("rms_norm", [1, 2])["kernel"] == "rms_norm"
    finally:
        run.stop()
    measure.check_counts(result, reqs)
    offsets = measure.arrival_offsets(4, 20.0, 0)
    sent = [result.requests[r.id].sent - result.start for r in reqs]
    assert sent == pytest.approx(offsets, abs=0.05)
    assert all(s >= o - 1e-3 for s, o in zip(sent, offsets, strict=True))


FAULTS = [
    ("crash", EngineCrashed, "crashed", "exit status 9"),
    ("hang", EngineTimeout, "timeout", "sent nothing for"),
    ("garbage", EngineProtocolError, "protocol", "not JSON"),
    ("extra", EngineProtocolError, "protocol", "more than max_tokens"),
    ("stranger", EngineProtocolError, "protocol", "'nobody', which was not sent"),
    ("fatal", EngineCrashed, "crashed", "kernel exploded"),
    ("uncalled", EngineProtocolError, "protocol", "never called the kernel tree's rms_norm"),
    ("build_error", KernelLoadFailed, "compile", "norm.py:3: import failed"),
    ("warmup_crash", EngineCrashed, "crashed", "failed its warm-up"),
]


@pytest.mark.parametrize(("mode", "error", "kind", "fragment"), FAULTS,
                         ids=[f[0] for f in FAULTS])
def test_faults_are_the_arms(tmp_path, tree, mode, error, kind, fragment):
    with pytest.raises(error) as caught:
        serve(fake_adapter(tmp_path, mode), tree, tmp_path)
    assert fragment in caught.value.message
    assert caught.value.failure_kind == kind
    assert caught.value.to_failure()["arm"] == "candidate"


def test_the_baselines_faults_are_the_evaluators(tmp_path, tree):
    with pytest.raises(EngineCrashed) as caught:
        serve(fake_adapter(tmp_path, "crash"), tree, tmp_path, arm="baseline")
    assert caught.value.failure_kind == "infra_error"
    with pytest.raises(KernelLoadFailed) as broken:
        serve(fake_adapter(tmp_path, "build_error"), tree, tmp_path, arm="baseline")
    assert broken.value.failure_kind == "task_error"


@pytest.mark.parametrize("mode", ["no_confine", "bad_weights"])
def test_setup_faults_are_never_the_candidates(tmp_path, tree, mode):
    with pytest.raises(EngineSetupError) as caught:
        serve(fake_adapter(tmp_path, mode), tree, tmp_path)
    assert caught.value.to_failure()["kind"] == "infra_error"
    assert not isinstance(caught.value, EngineFailure)


def test_an_engine_that_cannot_start_is_a_setup_error(tmp_path, tree):
    adapter = fake_adapter(tmp_path)
    adapter.command = [sys.executable, "-I", "-c", "import sys; sys.exit(5)"]
    with pytest.raises(EngineSetupError, match="did not start"):
        serve(adapter, tree, tmp_path)


def test_short_outputs_fail_the_count_check(tmp_path, tree):
    result, reqs, _ = serve(fake_adapter(tmp_path, "short"), tree, tmp_path)
    with pytest.raises(CountCheckFailed, match="tokens received"):
        measure.check_counts(result, reqs)


def test_an_oversized_line(tmp_path, tree, monkeypatch):
    monkeypatch.setattr(builtin, "MAX_LINE_BYTES", 1000)
    with pytest.raises(EngineProtocolError, match="a line of more than 1000 bytes"):
        serve(fake_adapter(tmp_path, "huge"), tree, tmp_path)


def test_stop_kills_the_whole_process_group(tmp_path, tree):
    adapter = fake_adapter(tmp_path, "child")
    wl = workload()
    run = adapter.start("candidate", tree, wl, wl.cases[0], tmp_path / "logs")
    pgid = run.proc.pid
    deadline = time.monotonic() + 10
    while len(group_members(pgid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(group_members(pgid)) >= 2  # the engine and its grandchild
    run.stop()
    deadline = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(pgid) == []
    run.stop()  # idempotent


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry))
    return members


# --------------------------------------------------------------------------- the client's limits


def most_outstanding(tmp_path: Path) -> int:
    log = (tmp_path / "logs" / "engine.candidate.log").read_text()
    return max(int(n) for n in re.findall(r"max_outstanding=(\d+)", log))


@pytest.mark.parametrize("rate", [math.inf, 200.0], ids=["all_at_once", "poisson"])
def test_the_client_never_has_more_than_max_concurrency_in_flight(tmp_path, tree, rate):
    # The engine runs the candidate's code, which may patch its slots: this one serves every
    # request it is sent at once. The judge's client is the limit, at every request rate.
    result, reqs, _ = serve(fake_adapter(tmp_path, "unlimited"), tree, tmp_path, rate=rate,
                            count=6, max_concurrency=2)
    measure.check_counts(result, reqs, max_concurrency=2)
    assert measure.max_in_flight(result) == 2
    assert most_outstanding(tmp_path) == 2, "the engine never held more than the limit"


def test_without_the_clients_limit_the_engine_takes_everything(tmp_path, tree):
    # What the limit prevents (and why the test above can fail): all six at once.
    result, reqs, _ = serve(fake_adapter(tmp_path, "unlimited"), tree, tmp_path, count=6)
    assert most_outstanding(tmp_path) == 6
    with pytest.raises(CountCheckFailed, match="6 requests were in flight at once"):
        measure.check_counts(result, reqs, max_concurrency=2)


def test_a_token_for_a_request_held_back_is_a_protocol_violation(tmp_path, tree):
    # req-4's id is predictable, but the client has not sent it yet: the engine cannot answer it.
    with pytest.raises(EngineProtocolError, match=r"req-4'?, which was not sent"):
        serve(fake_adapter(tmp_path, "ahead"), tree, tmp_path, max_concurrency=2)


DAEMON = """
import os, subprocess, sys, time
from aka_backend_e2e.engine_main import supervise
supervise()
# a daemon in a session of its own, out of the process group, its parent gone at once
subprocess.Popen([sys.executable, "-c", "import os, sys; os.fork() or os.execv(sys.executable, "
                  "[sys.executable, '-c', 'import time; time.sleep(120)', 'aka-e2e-' + "
                  "sys.argv[1]])", "{suffix}"], start_new_session=True, stdin=subprocess.DEVNULL)
print("ready", flush=True)
time.sleep(120)
"""


def test_stop_kills_processes_that_left_the_group(tmp_path):
    import subprocess

    suffix = f"daemon-{os.getpid()}-{time.monotonic_ns()}"
    marker = f"aka-e2e-{suffix}"  # in the daemon's command line only
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", DAEMON.format(suffix=suffix)],
                            stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    deadline = time.monotonic() + 10
    # Orphaned at once, the daemon comes back to the supervisor (a subreaper), not to init.
    while [parent_of(p) for p in with_marker(marker)] != [proc.pid] and (
            time.monotonic() < deadline):
        time.sleep(0.05)
    (daemon,) = with_marker(marker)
    assert parent_of(daemon) == proc.pid
    assert daemon not in group_members(proc.pid), "the daemon left the group"
    builtin.kill_group(proc)
    deadline = time.monotonic() + 10
    while with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert with_marker(marker) == []


def with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry))
    return found


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def test_the_judge_keeps_off_the_engine_core_while_it_times(monkeypatch):
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("one core: nothing to keep apart")
    core = max(mine)
    seen: list[set[int]] = []
    with builtin.off_engine_cores([core]):
        seen.append(os.sched_getaffinity(0))
    assert seen == [mine - {core}]
    assert os.sched_getaffinity(0) == mine  # given back
    with builtin.off_engine_cores(None):  # an engine not pinned: nothing changes
        assert os.sched_getaffinity(0) == mine
    assert builtin.cores_besides(sorted(mine)) is None  # never no core at all
