"""The docker executor without an engine: options, GPU pass-through settings, container settings,
which agents get a network, and the error when no engine runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from aka_executor_docker import CONFIG_SCHEMA, aka_register_executors, make_executor
from aka_executor_docker.engine import (
    ContainerSpec,
    DockerError,
    GpuPassthrough,
    connect,
    create_kwargs,
    gpu_settings,
)
from aka_executor_docker.executor import agent_needs_network
from aka_executor_docker.options import DockerOptions, Mount, parse_mount
from jsonschema import Draft202012Validator

from aka_core.plugin import AgentSpec, RunConfig, gpus, hookimpl, structure
from aka_core.testing import executor_run


def test_registered_through_the_host(register_plugin) -> None:
    import aka_executor_docker

    assert register_plugin(aka_executor_docker).executor("docker").factory is make_executor
    assert aka_register_executors()[0].config_schema is CONFIG_SCHEMA


@pytest.mark.parametrize("options", [
    {"image": "aka-cuda:latest"},
    {"image": "x", "gpus": [0, 1], "vendor": "nvidia", "memory": "64g", "pids_limit": 1024,
     "mounts": ["/data:/data:rw", {"source": "/srv", "read_only": True}],
     "credentials": ["~/.codex/auth.json"], "pass_env": ["OPENAI_API_KEY"]},
    {"image": "x", "memory": None, "gpus": "none", "agent_network": "host", "timeout_seconds": 60},
])
def test_schema_accepts(options: dict) -> None:
    assert not list(Draft202012Validator(CONFIG_SCHEMA).iter_errors(options))


@pytest.mark.parametrize("options", [
    {},                                               # no image
    {"image": "x", "gpu": "all"},                     # a typo
    {"image": "x", "gpus": "some"},
    {"image": "x", "memory": "lots"},
    {"image": "x", "pass_env": ["NOT-A-NAME"]},
    {"image": "x", "pids_limit": 4},
])
def test_schema_rejects(options: dict) -> None:
    assert list(Draft202012Validator(CONFIG_SCHEMA).iter_errors(options))


def test_defaults_limit_memory_and_processes() -> None:
    opts = DockerOptions.from_options({"image": "x"})
    assert (opts.gpus, opts.vendor, opts.memory, opts.pids_limit) == ("all", "auto", "32g", 4096)
    assert make_executor({"image": "x", "gpus": [0, "GPU-1"]}).options.gpus == ("0", "GPU-1")


def test_mounts_are_read_only_unless_rw_and_credentials_always(tmp_path: Path) -> None:
    assert parse_mount(f"{tmp_path}") == Mount(source=tmp_path, target=str(tmp_path))
    assert parse_mount(f"{tmp_path}:/data:rw") == Mount(source=tmp_path, target="/data",
                                                       read_only=False)
    assert parse_mount({"source": str(tmp_path), "target": "/x", "read_only": False}).read_only \
        is False
    opts = DockerOptions.from_options({"image": "x", "credentials": [f"{tmp_path}:/c:rw"]})
    assert opts.credentials[0].read_only is True
    assert parse_mount("~/key").source == Path.home() / "key"
    with pytest.raises(ValueError, match="SOURCE"):
        parse_mount("/a:/b:/c")


def test_nvidia_gpus_by_device_request() -> None:
    every = gpu_settings(GpuPassthrough(vendor="nvidia"))
    assert every["device_requests"][0]["Count"] == -1
    assert every["device_requests"][0]["Capabilities"] == [["gpu"]]
    some = gpu_settings(GpuPassthrough(vendor="nvidia", ids=("0", "2")))
    assert some["device_requests"][0]["DeviceIDs"] == ["0", "2"]


def test_amd_gpus_by_device_files() -> None:
    gpu = GpuPassthrough(vendor="amd", ids=("1",))
    if not os.path.exists("/dev/kfd"):
        with pytest.raises(DockerError, match="/dev/kfd"):
            gpu_settings(gpu)
        return
    settings = gpu_settings(gpu)
    assert settings["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert settings["environment"] == {"ROCR_VISIBLE_DEVICES": "1"}


def test_container_settings(tmp_path: Path) -> None:
    spec = ContainerSpec(image="img", command=("python3", "-V"), name="n", network="none",
                         mounts=(Mount(source=tmp_path, target="/t"),), memory="1g",
                         pids_limit=64, cpus=1.5, environment={"A": "1"})
    kwargs = create_kwargs(spec)
    assert kwargs["network_mode"] == "none"
    assert (kwargs["mem_limit"], kwargs["memswap_limit"], kwargs["pids_limit"]) == ("1g", "1g", 64)
    assert kwargs["nano_cpus"] == 1_500_000_000
    assert kwargs["mounts"][0]["ReadOnly"] is True and kwargs["mounts"][0]["Target"] == "/t"
    assert kwargs["init"] is True and "no-new-privileges" in kwargs["security_opt"]
    assert "device_requests" not in kwargs


def test_gpus_only_for_runs_that_evaluate_on_a_gpu() -> None:
    executor = make_executor({"image": "x"})
    cpu, h200, mi300x = (gpus.gpu_model(name) for name in ("cpu", "H200", "MI300X"))
    assert executor.gpu_for(cpu, "cpu") is None
    assert executor.gpu_for(h200, "cpu") is None           # evaluation.device: cpu
    assert executor.gpu_for(h200, "cuda") == GpuPassthrough(vendor="nvidia")
    assert executor.gpu_for(mi300x, "cuda") == GpuPassthrough(vendor="amd")
    assert make_executor({"image": "x", "gpus": "none"}).gpu_for(h200, "cuda") is None
    assert make_executor({"image": "x", "gpus": [3], "vendor": "amd"}).gpu_for(
        h200, "cuda") == GpuPassthrough(vendor="amd", ids=("3",))


class _Agents:
    @hookimpl
    def aka_register_agents(self) -> list[AgentSpec]:
        return [AgentSpec(name="in-process", factory=lambda options: None),
                AgentSpec(name="some-cli", factory=lambda options: None, needs_network=True)]


def test_only_cli_agents_get_a_network(register_plugin) -> None:
    host = register_plugin(_Agents())

    def config(agent: str) -> RunConfig:
        return structure({"agent": {"template": agent}, "tasks": [], "target_gpu_model": "cpu"},
                         RunConfig)

    assert agent_needs_network(config("in-process"), host) is False
    assert agent_needs_network(config("some-cli"), host) is True


def test_no_engine_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"unix://{tmp_path}/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", dead)
    with pytest.raises(DockerError, match=f"cannot reach the docker engine at {dead}: nothing "
                                          "listens there"):
        connect()


def test_no_tasks_contacts_no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    calls: list[str] = []
    make_executor({"image": "x"}).execute(executor_run(tmp_path / "run", [], calls.append))
    assert calls == []
