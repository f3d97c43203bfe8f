"""Loading run configs: what a user sees for a wrong key, type, plugin name or option."""

from __future__ import annotations

from pathlib import Path

import pytest

from aka_core.convert import structure, unstructure
from aka_core.errors import ConfigError
from aka_core.models import AgentConfig, NamedPluginConfig, RunConfig
from aka_core.plugin.host import PluginHost
from aka_core.run.config import load_run_config, resolve_tasks_directory

GOOD = """\
agent:
  template: replay
  timeout_seconds: 600
  options:
    source: tests/solutions
tasks:
  - triton2triton/gelu
target_gpu_model: H100
scorer: {name: speedup, options: {threshold: 1.1}}
evaluation: {device: cpu, seeds_per_case: 2}
"""


def config_error(path: Path, host: PluginHost | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_run_config(path, host)
    return str(info.value)


def test_valid_config_loads_with_defaults(tmp_path: Path, write, host: PluginHost) -> None:
    path = write(tmp_path / "configs" / "run.yaml", GOOD)
    config = load_run_config(path, host)
    assert isinstance(config, RunConfig)
    assert config.agent == AgentConfig(name="replay", timeout_seconds=600,
                                       options={"source": "tests/solutions"})
    assert config.tasks == ("triton2triton/gelu",)
    assert config.executor == NamedPluginConfig(name="local")
    assert config.evaluation.device == "cpu" and config.evaluation.held_out is True
    assert config.evaluation.seeds_per_case == 2
    assert config.source == str(path)


def test_misspelled_key_gives_line_field_and_suggestion(tmp_path: Path, write) -> None:
    path = write(tmp_path / "run.yaml", GOOD.replace("timeout_seconds", "timout_seconds"))
    assert config_error(path) == (
        f"{path}:3: agent.timout_seconds: unknown key (did you mean 'timeout_seconds'?)"
    )


def test_wrong_types_are_all_reported(tmp_path: Path, write) -> None:
    text = GOOD.replace("600", "ten minutes").replace("- triton2triton/gelu", "- 42")
    message = config_error(write(tmp_path / "run.yaml", text))
    assert f"{tmp_path / 'run.yaml'}:3: agent.timeout_seconds: expected a number" in message
    assert f"{tmp_path / 'run.yaml'}:7: tasks[0]: expected a string, got an integer" in message


def test_unknown_agent_lists_available_names(tmp_path: Path, write, host: PluginHost) -> None:
    path = write(tmp_path / "run.yaml", GOOD.replace("template: replay", "template: replya"))
    message = config_error(path, host)
    assert message.startswith(f"{path}:2: agent.template: no agent named 'replya'")
    assert "did you mean 'replay'?" in message
    assert "available: noop, replay" in message


def test_unknown_executor_and_scorer_are_reported_together(
        tmp_path: Path, write, host: PluginHost) -> None:
    text = GOOD.replace("name: speedup", "name: fastp") + "executor: {name: slurm}\n"
    message = config_error(write(tmp_path / "run.yaml", text), host)
    assert "9: scorer.name: no scorer named 'fastp'" in message
    assert "11: executor.name: no executor named 'slurm'" in message
    assert "available: local" in message


def test_default_scorer_missing_says_it_is_the_default(
        tmp_path: Path, write, bare_host: PluginHost) -> None:
    text = "agent: {template: noop}\ntasks: [a]\ntarget_gpu_model: cpu\n"
    path = write(tmp_path / "run.yaml", text)
    message = config_error(path, bare_host)
    assert "the default scorer is not installed: no scorer named 'speedup'" in message


def test_plugin_options_are_validated_with_the_plugins_schema(
        tmp_path: Path, write, host: PluginHost) -> None:
    path = write(tmp_path / "run.yaml", GOOD.replace("source:", "sorce:"))
    message = config_error(path, host)
    assert f"{path}:5: agent.options.sorce: unknown key (did you mean 'source'?)" in message
    assert f"{path}:4: agent.options: missing required key 'source'" in message


def test_options_for_a_plugin_that_takes_none(tmp_path: Path, write, host: PluginHost) -> None:
    text = GOOD.replace("template: replay", "template: noop")
    message = config_error(write(tmp_path / "run.yaml", text), host)
    assert "4: agent.options: agent 'noop' takes no options" in message


def test_unknown_gpu_model_names_line_and_known_models(tmp_path: Path, write) -> None:
    path = write(tmp_path / "run.yaml", GOOD.replace("H100", "H1OO"))
    message = config_error(path)
    assert message.startswith(f"{path}:8: target_gpu_model: unknown GPU model 'H1OO'")
    assert "MI300X" in message


def test_architecture_is_a_valid_target(tmp_path: Path, write) -> None:
    path = write(tmp_path / "run.yaml", GOOD.replace("H100", "gfx942"))
    target = load_run_config(path).target_gpu_model
    assert target is not None
    assert (target.name, target.vendor, target.architecture) == ("gfx942", "amd", "gfx942")


def test_target_is_parsed_once_and_written_as_spelled(tmp_path: Path, write) -> None:
    """The config's spelling names the run folder and run.yaml; the model is the known one."""
    config = load_run_config(write(tmp_path / "run.yaml", GOOD.replace("H100", "h100")))
    assert config.target_gpu_model is not None
    assert (config.target_name, config.target_gpu_model.architecture) == ("h100", "sm_90")
    assert unstructure(config)["target_gpu_model"] == "h100"
    assert structure(unstructure(config), RunConfig).target_gpu_model == config.target_gpu_model


def test_yaml_syntax_error_names_the_line(tmp_path: Path, write) -> None:
    path = write(tmp_path / "run.yaml", "agent: {template: noop\ntasks: [a]\n")
    assert "invalid YAML" in config_error(path)


def test_a_config_that_is_not_a_mapping(tmp_path: Path, write) -> None:
    path = write(tmp_path / "run.yaml", "- a\n- b\n")
    assert "expected a mapping" in config_error(path)


def test_a_yaml_alias_bomb_is_refused_without_expanding_it(tmp_path: Path, write) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)]
    path = write(tmp_path / "run.yaml", GOOD + "\n".join(lines) + "\n")
    message = config_error(path)  # 10**12 values if expanded: this returns at once
    assert f"{path}:" in message and "once its aliases (*name) are followed" in message


def test_a_config_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_bytes(GOOD.encode() + b"# caf\xe9\n")
    message = config_error(path)
    assert f"{path}:11: not UTF-8 text (byte" in message and "save the file as UTF-8" in message


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e41"])
def test_timeouts_must_be_finite_and_bounded(tmp_path: Path, write, value: str) -> None:
    path = write(tmp_path / "run.yaml", GOOD.replace("timeout_seconds: 600",
                                                     f"timeout_seconds: {value}"))
    message = config_error(path)
    assert f"{path}:3: agent.timeout_seconds:" in message, message
    assert ("not a finite number" in message) or ("604800" in message), message


def test_a_folder_given_as_the_config_file(tmp_path: Path) -> None:
    assert "is a folder, not a YAML file" in config_error(tmp_path)


# --------------------------------------------------------------------------- tasks directory


def _config(tasks_directory: str | None = None) -> RunConfig:
    return RunConfig(agent=AgentConfig(name="noop"), tasks=("a",), target_gpu_model="cpu",
                     tasks_directory=tasks_directory)


def test_tasks_directory_is_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "my_tasks").mkdir()
    config_path = tmp_path / "configs" / "run.yaml"
    config_path.parent.mkdir()
    assert resolve_tasks_directory(_config("../my_tasks"), config_path) == \
        (tmp_path / "my_tasks").resolve()


def test_tasks_directory_found_in_a_parent_folder(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    config_path = tmp_path / "configs" / "deep" / "run.yaml"
    config_path.parent.mkdir(parents=True)
    assert resolve_tasks_directory(_config(), config_path) == (tmp_path / "tasks").resolve()


def test_missing_tasks_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tasks directory .*nope' does not exist"):
        resolve_tasks_directory(_config("nope"), tmp_path / "run.yaml")
