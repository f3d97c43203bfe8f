"""Discovering tasks and resolving a run config's task selectors."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from aka_core.errors import SelectionError
from aka_core.plugin.host import PluginHost
from aka_core.run.selection import discover_tasks, resolve_selectors


@pytest.fixture
def tasks_root(make_task, tmp_path: Path) -> Path:
    for task_id in ("triton2triton/gelu", "triton2triton/softmax", "torch2triton/cross_entropy",
                    "torch2triton/nested/deep"):
        make_task(task_id)
    (tmp_path / "tasks" / "triton2triton" / "gelu" / "sub").mkdir()  # inside a task: not a task
    make_task("triton2triton/gelu/sub/inner")
    (tmp_path / "tasks" / "empty_family").mkdir()
    (tmp_path / "tasks" / ".hidden" / "x").mkdir(parents=True)
    (tmp_path / "tasks" / ".hidden" / "x" / "task.yaml").write_text("format: operator\n")
    return tmp_path / "tasks"


def test_discover_tasks_gives_ids_relative_to_the_root(tasks_root: Path,
                                                       bare_host: PluginHost) -> None:
    found = discover_tasks(tasks_root, bare_host)
    assert list(found) == ["torch2triton/cross_entropy", "torch2triton/nested/deep",
                           "triton2triton/gelu", "triton2triton/softmax"]
    assert found["triton2triton/gelu"] == tasks_root / "triton2triton" / "gelu"


def test_selectors_keep_order_and_dedupe(tasks_root: Path, bare_host: PluginHost) -> None:
    selected = resolve_selectors(
        ["triton2triton/softmax", "triton2triton", "torch2triton/nested/deep/",
         "./triton2triton/gelu"],
        tasks_root, bare_host)
    assert selected == ["triton2triton/softmax", "triton2triton/gelu", "torch2triton/nested/deep"]


def test_folder_selects_every_descendant(tasks_root: Path, bare_host: PluginHost) -> None:
    assert resolve_selectors(["torch2triton"], tasks_root, bare_host) == [
        "torch2triton/cross_entropy", "torch2triton/nested/deep"]


def test_selector_may_start_with_the_tasks_folder(tasks_root: Path,
                                                  bare_host: PluginHost) -> None:
    assert resolve_selectors(["tasks/triton2triton/gelu"], tasks_root, bare_host) == [
        "triton2triton/gelu"]
    assert len(resolve_selectors(["."], tasks_root, bare_host)) == 4


def test_a_prefix_that_is_not_a_folder_selects_nothing(tasks_root: Path,
                                                       bare_host: PluginHost) -> None:
    with pytest.raises(SelectionError):
        resolve_selectors(["triton2"], tasks_root, bare_host)


def test_misspelled_selector_names_close_tasks_and_config_line(
        tasks_root: Path, bare_host: PluginHost, tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    doc = YAML(typ="rt").load("agent: {template: noop}\ntasks:\n  - triton2triton/gelu\n"
                              "  - triton2triton/gelo\n")
    with pytest.raises(SelectionError) as info:
        resolve_selectors(list(doc["tasks"]), tasks_root, bare_host, source_file=config,
                          source_doc=doc)
    message = str(info.value)
    assert message.startswith(f"{config}:4: tasks[1]: no task or folder 'triton2triton/gelo'")
    assert "did you mean 'triton2triton/gelu'?" in message


def test_task_name_without_its_family_suggests_the_full_id(tasks_root: Path,
                                                          bare_host: PluginHost) -> None:
    with pytest.raises(SelectionError) as info:
        resolve_selectors(["softmax"], tasks_root, bare_host)
    assert "did you mean 'triton2triton/softmax'?" in str(info.value)


def test_every_bad_selector_is_reported(tasks_root: Path, bare_host: PluginHost) -> None:
    with pytest.raises(SelectionError) as info:
        resolve_selectors(["nope", "triton2triton/gelu", "empty_family"], tasks_root, bare_host)
    problems = info.value.problems
    assert [p.field for p in problems] == ["tasks[0]", "tasks[2]"]
    assert "folder 'empty_family'" in problems[1].message
    assert "holds no task" in problems[1].message


def test_empty_tasks_folder(tmp_path: Path, bare_host: PluginHost) -> None:
    with pytest.raises(SelectionError, match="no tasks found under"):
        resolve_selectors(["a"], tmp_path, bare_host)


@pytest.mark.parametrize("selector", ["triton2triton/" + "g" * 300, "tasks/" + "g" * 300,
                                      "g" * 5000])
def test_a_selector_no_folder_can_be_named_selects_nothing(tasks_root: Path,
                                                           bare_host: PluginHost,
                                                           selector: str) -> None:
    """A selector over the file system's name limit made `aka validate` and `aka run` a
    traceback (``OSError: File name too long``) instead of naming the config's entry."""
    with pytest.raises(SelectionError) as info:
        resolve_selectors([selector], tasks_root, bare_host)
    assert "no task or folder" in str(info.value)
