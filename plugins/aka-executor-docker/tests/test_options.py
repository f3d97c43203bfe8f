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
from aka_executor_docker.executor import DockerExecutor, agent_needs_network
from aka_executor_docker.options import DockerOptions, Mount, parse_mount
from jsonschema import Draft202012Validator

from aka_core.plugin import AgentSpec, RunConfig, gpus, hookimpl, structure, unstructure
from aka_core.testing import cli_main, executor_run, write_task

RECORD = aka_register_executors()[0]


def executor(options: dict) -> DockerExecutor:
    """The executor as a run builds it: its options typed through the record."""
    return RECORD.make(options)


def test_registered_through_the_host(register_plugin) -> None:
    import aka_executor_docker

    assert register_plugin(aka_executor_docker).executor("docker").factory is make_executor
    assert RECORD.config_schema is CONFIG_SCHEMA and RECORD.options_class is DockerOptions


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
    opts = executor({"image": "x"}).options
    assert opts == DockerOptions(image="x")
    assert (opts.gpus, opts.vendor, opts.memory, opts.pids_limit) == ("all", "auto", "32g", 4096)
    assert executor({"image": "x", "gpus": [0, "GPU-1"]}).options.gpus == ("0", "GPU-1")
    typed = executor({"image": "x", "cpus": 2, "pass_env": ["A"], "memory": None}).options
    assert (typed.cpus, typed.pass_env, typed.memory) == (2.0, ("A",), None)


def test_mounts_are_read_only_unless_rw_and_credentials_always(tmp_path: Path) -> None:
    assert parse_mount(f"{tmp_path}") == Mount(source=tmp_path, target=str(tmp_path))
    assert parse_mount(f"{tmp_path}:/data:rw") == Mount(source=tmp_path, target="/data",
                                                       read_only=False)
    assert parse_mount({"source": str(tmp_path), "target": "/x", "read_only": False}).read_only \
        is False
    assert parse_mount("~/key").source == Path.home() / "key"
    with pytest.raises(ValueError, match="SOURCE"):
        parse_mount("/a:/b:/c")
    opts = executor({"image": "x", "credentials": [f"{tmp_path}:/c:rw"],
                     "mounts": [f"{tmp_path}:/data:rw", {"source": "~/srv", "target": "/srv"}]}).options
    assert opts.credentials == (Mount(source=tmp_path, target="/c", read_only=True),)
    assert opts.mounts == (Mount(source=tmp_path, target="/data", read_only=False),
                           Mount(source=Path.home() / "srv", target="/srv"))


def test_typed_options_survive_a_round_trip(tmp_path: Path) -> None:
    opts = executor({"image": "x", "gpus": [1], "mounts": [f"{tmp_path}:/d:rw"],
                     "credentials": [str(tmp_path)]}).options
    assert structure(unstructure(opts), DockerOptions) == opts


@pytest.mark.parametrize(("options", "message"), [
    ({"mounts": ["/a", "/a:/b:/c"]},
     "mounts[1]: mount '/a:/b:/c': expected SOURCE[:TARGET][:ro|rw]"),
    ({"credentials": ["/k:/a:/b"]},
     "credentials[0]: mount '/k:/a:/b': expected SOURCE[:TARGET][:ro|rw]"),
    ({"mounts": [{"target": "/x"}]},
     "mounts[0]: mount {'target': '/x'}: expected SOURCE[:TARGET][:ro|rw] or "
     "{source, target, read_only}"),
    ({"mounts": "/a:/b"}, "mounts: expected a list of mounts, got '/a:/b'"),
])
def test_a_bad_mount_names_its_field_and_entry(options: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        executor({"image": "x", **options})
    assert str(caught.value) == message


def write_config(tmp_path: Path, executor_options: str) -> Path:
    write_task(tmp_path / "tasks", "demo/a")
    path = tmp_path / "run.yaml"
    path.write_text("agent: {template: noop}\n"
                    "tasks: [demo]\n"
                    "target_gpu_model: cpu\n"
                    "executor:\n"
                    "  name: docker\n"
                    "  options:\n"
                    "    image: x\n" + executor_options, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_bad_mount_in_a_config_names_file_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    config = write_config(tmp_path, "    mounts: [/data, '/a:/b:/c']\n")
    args = [command, str(config)]
    if command == "run":
        args += ["--output-root", str(tmp_path / "out"), "--no-progress"]
    assert cli_main(args) == 2
    shown = capsys.readouterr()
    assert (f"{config}:6: executor.options: executor 'docker' rejects its options: mounts[1]: "
            "mount '/a:/b:/c': expected SOURCE[:TARGET][:ro|rw]") in shown.out + shown.err
    assert not (tmp_path / "out").exists(), "nothing is created for an invalid config"


def test_schema_errors_name_file_line_and_field(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, "    mount: [/data]\n")
    assert cli_main(["validate", str(config)]) == 2
    assert (f"{config}:8: executor.options.mount: unknown key (did you mean 'mounts'?)"
            in capsys.readouterr().out)


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
    every = executor({"image": "x"})
    cpu, h200, mi300x = (gpus.gpu_model(name) for name in ("cpu", "H200", "MI300X"))
    assert every.gpu_for(cpu, "cpu") is None
    assert every.gpu_for(h200, "cpu") is None           # evaluation.device: cpu
    assert every.gpu_for(h200, "cuda") == GpuPassthrough(vendor="nvidia")
    assert every.gpu_for(mi300x, "cuda") == GpuPassthrough(vendor="amd")
    assert executor({"image": "x", "gpus": "none"}).gpu_for(h200, "cuda") is None
    assert executor({"image": "x", "gpus": [3], "vendor": "amd"}).gpu_for(
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
    executor({"image": "x"}).execute(executor_run(tmp_path / "run", [], calls.append))
    assert calls == []
