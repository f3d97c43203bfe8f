"""The docker executor against a real engine and the CI image.

Skipped, saying why, when no engine answers or the image is missing (scripts/ci/docker-setup.sh
makes both); with AKA_REQUIRE_DOCKER=1 (CI after that setup) they fail instead of skipping.
The image is ``aka-ci:latest`` unless AKA_DOCKER_TEST_IMAGE names another.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from aka_executor_docker import aka_register_executors
from aka_executor_docker.engine import (
    LABEL_RUN,
    ContainerSpec,
    DockerError,
    GpuPassthrough,
    connect,
    network_problem,
    require_image,
    run_container,
)
from aka_executor_docker.executor import RunInfo

from aka_core.plugin import PluginHost, dump_yaml, load_plain_yaml, write_yaml_atomic
from aka_core.testing import ExecutorContract, create_run, open_run, read_task_result, smoke

pytestmark = pytest.mark.slow

IMAGE = os.environ.get("AKA_DOCKER_TEST_IMAGE", "aka-ci:latest")
COMPARED = ("status", "pass_compilation", "pass_correctness", "candidate_accepted", "score",
            "speedup_ratio")


@functools.cache
def _unavailable() -> str | None:
    try:
        client = connect()
    except DockerError as exc:
        return f"no docker engine ({exc})"
    try:
        require_image(client, IMAGE)
    except DockerError:
        return f"the image {IMAGE} is missing: scripts/ci/docker-setup.sh (or images/build.sh ci)"
    return None


@pytest.fixture
def docker_image() -> str:
    reason = _unavailable()
    if reason:
        if os.environ.get("AKA_REQUIRE_DOCKER") == "1":
            pytest.fail(f"AKA_REQUIRE_DOCKER=1 but {reason}")
        pytest.skip(reason)
    return IMAGE


@pytest.fixture
def client(docker_image: str) -> Any:
    return connect()


def aka(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aka_core.cli", *args], capture_output=True,
                          text=True, timeout=900, env={**os.environ, **(env or {})}, check=False)


def write_config(tmp_path: Path, name: str, executor: dict[str, Any], *,
                 tasks: list[str] | None = None) -> Path:
    config = {
        "agent": {"template": "noop", "timeout_seconds": 600},
        "tasks": tasks or ["demo/scale_add"],
        "target_gpu_model": "cpu",
        "tasks_directory": str(tmp_path / "tasks"),
        "executor": executor,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(dump_yaml(config), encoding="utf-8")
    return path


def run_dir_of(proc: subprocess.CompletedProcess[str]) -> Path:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


def containers_of(client: Any, run_dir: Path) -> list[Any]:
    return client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_dir}"})


# --------------------------------------------------------------------------- the contract


class TestDockerContract(ExecutorContract):
    """The contract's own tests call ``run_task`` in-process; this executor runs ``aka run-task``
    in containers instead, so "every task exactly once" is checked on the run's results."""

    record = aka_register_executors()[0]
    options = {"image": IMAGE}

    def test_runs_every_task_exactly_once(self, request: pytest.FixtureRequest, executor: Any,
                                          tmp_path: Path) -> None:
        request.getfixturevalue("docker_image")
        make_task = request.getfixturevalue("make_task")
        ids = ["demo/a", "other/c"]
        for task_id in ids:
            make_task(task_id)
        config = write_config(tmp_path, "contract", {"name": "docker", "options": self.options},
                              tasks=ids)
        run_dir = create_run(config, PluginHost(), output_root=tmp_path / "out")
        calls: list[str] = []
        run = attrs.evolve(open_run(run_dir, PluginHost()), run_task=calls.append)
        executor.execute(run)
        assert calls == [], "run_task is not called in-process: tasks run in containers"
        for task_id in ids:
            assert read_task_result(run_dir / task_id / "task_result.yaml").task_id == task_id
            log = (run_dir / task_id / "logs" / "container.log").read_text()
            assert log.count("[aka]") == 2, log


# --------------------------------------------------------------------------- runs


def test_cpu_task_in_a_container_matches_a_local_run(
    docker_image: str, client: Any, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    make_task()
    local = run_dir_of(aka("run", str(write_config(tmp_path, "local", {"name": "local"})),
                           "--output-root", str(tmp_path / "local"), "--no-progress"))
    docker = run_dir_of(aka("run", str(write_config(
        tmp_path, "docker", {"name": "docker", "options": {"image": docker_image}})),
        "--output-root", str(tmp_path / "docker"), "--no-progress"))

    want = read_task_result(local / "demo/scale_add/task_result.yaml")
    got = read_task_result(docker / "demo/scale_add/task_result.yaml")
    assert want.status == "completed" and want.candidate_accepted, want
    assert {f: getattr(got, f) for f in COMPARED} == {f: getattr(want, f) for f in COMPARED}
    assert got.agent_execution is not None and got.agent_execution.status == "completed"
    assert got.integrity is not None and got.integrity.ok
    assert [g.name for g in got.acceptance.gates] == [g.name for g in want.acceptance.gates]
    assert set(load_plain_yaml(docker / "demo/scale_add/task_result.yaml")) == set(
        load_plain_yaml(local / "demo/scale_add/task_result.yaml"))

    log = (docker / "demo/scale_add/logs/container.log").read_text()
    assert "network none" in log and "exit code 0" in log, log
    assert (docker / "reports" / "summary.csv").is_file()
    assert not (docker / ".containers").exists()
    assert containers_of(client, docker) == [], "containers are removed after each task"


def run_gelu_replay(docker_image: str, tmp_path: Path, **options: Any) -> Path:
    """Run the replay of the stored gelu solution in the image; returns the task's folder."""
    repo = Path(__file__).resolve().parents[3]
    solutions = repo / "tests" / "solutions"
    config = {
        "agent": {"template": "replay", "timeout_seconds": 600,
                  "options": {"source": str(solutions)}},
        "tasks": ["triton2triton/gelu"],
        "target_gpu_model": "cpu",
        "tasks_directory": str(repo / "tasks"),
        "executor": {"name": "docker", "options": {"image": docker_image,
                                                   "mounts": [str(solutions)], **options}},
    }
    path = tmp_path / "gelu.yaml"
    path.write_text(dump_yaml(config), encoding="utf-8")
    run_dir = run_dir_of(aka("run", str(path), "--output-root", str(tmp_path), "--no-progress"))
    return run_dir / "triton2triton/gelu"


def test_triton_task_in_a_container(docker_image: str, tmp_path: Path) -> None:
    """A Triton kernel through Triton's CPU interpreter inside the image (the replay agent
    delivers the stored faster solution, mounted read-only)."""
    result = read_task_result(run_gelu_replay(docker_image, tmp_path) / "task_result.yaml")
    assert (result.status, result.pass_compilation, result.pass_correctness) == (
        "completed", True, True), result.error or result.acceptance
    assert result.evaluation.device.software["mode"].startswith("interpreter")


def test_agent_and_evaluation_in_two_containers(docker_image: str, tmp_path: Path) -> None:
    """The split a CLI agent gets (agent container, then an evaluation container without network
    or credentials), forced here for the replay agent: same result as one container."""
    task = run_gelu_replay(docker_image, tmp_path, separate_evaluation="always")
    result = read_task_result(task / "task_result.yaml")
    assert (result.status, result.pass_compilation, result.pass_correctness,
            result.candidate_accepted) == ("completed", True, True, True), result.acceptance
    assert result.agent_execution.agent == "replay"
    log_text = (task / "logs" / "container.log").read_text()
    assert "(phase agent)" in log_text and "(phase evaluate)" in log_text


# --------------------------------------------------------------------------- isolation


@pytest.fixture
def loopback_listener() -> Iterator[int]:
    """A TCP server on this host's loopback; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
           "except OSError as exc:\n"
           "    print('unreachable', type(exc).__name__); sys.exit(3)\n"
           "print('reached')\n")


def test_network_none_cannot_reach_the_host(client: Any, loopback_listener: int,
                                            docker_image: str) -> None:
    """With network none even this host's own loopback is out of reach; with network host it is
    reached (so the check can fail)."""
    def attempt(network: str) -> Any:
        spec = ContainerSpec(image=docker_image, name=f"aka-test-net-{network}-{os.getpid()}",
                             network=network,
                             command=("python3", "-c", CONNECT.format(port=loopback_listener)))
        return run_container(client, spec, timeout=120, log_path=None, capture_output=True)

    isolated = attempt("none")
    assert (isolated.exit_code, isolated.stdout.split()[:1]) == (3, ["unreachable"]), isolated
    assert attempt("host").stdout.strip() == "reached"


def test_networks_are_checked_before_use(client: Any) -> None:
    assert network_problem(client, "none") is None and network_problem(client, "host") is None
    with pytest.raises(DockerError, match="docker network 'aka-no-such-network' does not exist"):
        network_problem(client, "aka-no-such-network")
    names = {n.name for n in client.networks.list()}
    assert (network_problem(client, "bridge") is None) == ("bridge" in names)


def test_evaluation_of_an_in_process_agent_has_no_network(
    docker_image: str, tmp_path: Path, make_task: Callable[..., Path], loopback_listener: int
) -> None:
    """The candidate itself probes the network during the evaluation: in the container it sees
    only a loopback interface and cannot reach this host; run locally, the same task fails."""
    task_dir = make_task("net/probe")
    kernel = task_dir / "kernel.py"
    kernel.write_text(
        "import os\nimport socket\n\n\n"
        "def scale_add(x, y, alpha):\n"
        "    interfaces = sorted(os.listdir('/sys/class/net'))\n"
        "    if interfaces != ['lo']:\n"
        "        raise RuntimeError(f'network interfaces visible: {interfaces}')\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {loopback_listener}), timeout=3).close()\n"
        "    except OSError:\n"
        "        return x + alpha * y\n"
        "    raise RuntimeError('reached a server on the host')\n", encoding="utf-8")
    docker = run_dir_of(aka("run", str(write_config(
        tmp_path, "docker", {"name": "docker", "options": {"image": docker_image}},
        tasks=["net/probe"])), "--output-root", str(tmp_path / "docker"), "--no-progress"))
    inside = read_task_result(docker / "net/probe/task_result.yaml")
    assert (inside.pass_compilation, inside.pass_correctness) == (True, True), inside.acceptance
    local = run_dir_of(aka("run", str(write_config(tmp_path, "local", {"name": "local"},
                                                   tasks=["net/probe"])),
                           "--output-root", str(tmp_path / "local"), "--no-progress"))
    outside = read_task_result(local / "net/probe/task_result.yaml")
    assert not outside.candidate_accepted
    assert "network interfaces visible" in (outside.error or "") or "reached a server" in (
        outside.error or ""), outside.error


# --------------------------------------------------------------------------- failures


def test_missing_image_is_a_clear_error(docker_image: str, client: Any, tmp_path: Path,
                                        make_task: Callable[..., Path]) -> None:
    make_task()
    proc = aka("run", str(write_config(tmp_path, "missing", {
        "name": "docker", "options": {"image": "aka-no-such-image:none"}})),
        "--output-root", str(tmp_path), "--no-progress")
    assert proc.returncode == 1, proc.stderr
    assert "docker image 'aka-no-such-image:none' is not on this engine" in proc.stderr
    assert "images/build.sh" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_engine_stops_the_run_with_a_clear_error(tmp_path: Path,
                                                    make_task: Callable[..., Path]) -> None:
    make_task()
    dead = f"unix://{tmp_path}/docker.sock"
    proc = aka("run", str(write_config(tmp_path, "dead", {"name": "docker",
                                                           "options": {"image": IMAGE}})),
               "--output-root", str(tmp_path / "out"), "--no-progress", env={"DOCKER_HOST": dead})
    assert proc.returncode == 1, proc.stderr
    assert f"cannot reach the docker engine at {dead}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_smoke_without_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    docker_checks = [c for c in smoke(PluginHost(), executor="docker", image=IMAGE,
                                      target_gpu_model="cpu") if c.where == "docker"]
    assert [(c.name, c.ok) for c in docker_checks] == [("engine", False)]
    assert "cannot reach the docker engine" in docker_checks[0].detail


def test_gpu_not_visible_in_the_container(client: Any, tmp_path: Path,
                                          make_task: Callable[..., Path]) -> None:
    """A run that evaluates on a GPU stops before its first task when the container sees none."""
    make_task()
    run = RunInfo.of(open_run(_cpu_run(tmp_path), PluginHost()))
    gpu_run = attrs.evolve(run, device="cuda",
                           config=attrs.evolve(run.config, target_gpu_model="H200"))
    executor = aka_register_executors()[0].make({"image": IMAGE, "gpus": "none"})
    with pytest.raises(DockerError, match="no GPU visible inside a container"):
        executor.preflight(client, gpu_run, "none")


def test_gpu_request_without_the_nvidia_toolkit(client: Any) -> None:
    if "nvidia" in (client.info().get("Runtimes") or {}) or os.path.exists("/dev/nvidiactl"):
        pytest.skip("this engine can pass NVIDIA GPUs through")
    executor = aka_register_executors()[0].make({"image": IMAGE})
    with pytest.raises(DockerError, match="NVIDIA Container Toolkit"):
        executor.container_facts(client, GpuPassthrough(vendor="nvidia"))


def test_killed_container_leaves_no_result_and_resume_redoes_it(
    docker_image: str, client: Any, tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    ids = ["demo/a", "demo/b"]
    for task_id in ids:
        make_task(task_id)
    config = write_config(tmp_path, "killed", {"name": "docker", "options": {
        "image": docker_image, "timeout_seconds": 1}}, tasks=ids)
    run_dir = run_dir_of(aka("run", str(config), "--output-root", str(tmp_path), "--no-progress"))
    for task_id in ids:  # both tried: the executor went on after the first was killed
        assert not (run_dir / task_id / "task_result.yaml").exists()
        assert "killed at its limit" in (run_dir / task_id / "logs/container.log").read_text()
    assert containers_of(client, run_dir) == []

    meta = load_plain_yaml(run_dir / "run.yaml")
    meta["config"]["executor"]["options"]["timeout_seconds"] = 600
    write_yaml_atomic(run_dir / "run.yaml", meta)
    run_dir_of(aka("run", "--resume", str(run_dir), "--no-progress"))
    for task_id in ids:
        assert read_task_result(run_dir / task_id / "task_result.yaml").status == "completed"
    assert len(list((run_dir / ".interrupted").glob("*/demo/*"))) == 2


def test_smoke_inside_the_container(docker_image: str) -> None:
    checks = smoke(PluginHost(), executor="docker", target_gpu_model="cpu", image=docker_image)
    inside = {c.name: c for c in checks if c.where == "docker"}
    assert {"engine", "image", "python", "aka", "torch", "triton", "gpu", "plugins"} <= set(inside)
    assert all(c.ok for c in inside.values()), [c for c in inside.values() if not c.ok]
    gpu_target = [c for c in smoke(PluginHost(), executor="docker", target_gpu_model="H200",
                                   image=docker_image) if c.where == "docker" and not c.ok]
    assert gpu_target, "an H200 target cannot pass in a CPU image"
    missing = [c for c in smoke(PluginHost(), executor="docker", image="aka-no-such-image:none")
               if c.where == "docker"]
    assert [(c.name, c.ok) for c in missing] == [("engine", True), ("image", False)]


# --------------------------------------------------------------------------- helpers


def _cpu_run(tmp_path: Path) -> Path:
    config = write_config(tmp_path, "cpu", {"name": "docker", "options": {"image": IMAGE}})
    return create_run(config, PluginHost(), output_root=tmp_path / "out")

