"""Loading operator tasks: defaults, and the static checks a task author sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from aka_core.errors import ConfigError
from aka_core.host import PluginHost
from aka_core.models import Case, Tolerance
from aka_core.operator_tasks import OperatorTaskFormat, load_task

REPO_TASKS = Path(__file__).resolve().parents[2] / "tasks"


def load_error(folder: Path) -> str:
    with pytest.raises(ConfigError) as info:
        OperatorTaskFormat().load(folder, "triton2triton/scale")
    return str(info.value)


def test_valid_task_loads_with_defaults(make_task, bare_host: PluginHost) -> None:
    folder = make_task()
    task = load_task(folder, "triton2triton/scale", bare_host)
    assert task.id == task.name == "triton2triton/scale"
    assert task.root == folder
    assert task.baseline == "kernel.py:scale"  # defaults to the entrypoint
    assert task.baseline_is_initial_candidate
    assert task.cases == (Case(name="small", params={"N": 16}),)
    assert task.smoke_case == Case(name="tiny", params={"N": 4})
    assert task.tolerance["float32"] == Tolerance(rtol=1e-5, atol=1e-6)
    assert task.requires.vendors == ("nvidia", "amd")
    assert task.timeouts.compile_seconds > 0


def test_provided_baseline_and_name(make_task, task_yaml: str) -> None:
    yaml = task_yaml + "name: Scale\nbaseline: baseline.py:scale_eager\n"
    folder = make_task(yaml=yaml, files={"baseline.py": "def scale_eager(x):\n    return 2*x\n"})
    task = OperatorTaskFormat().load(folder, "triton2triton/scale")
    assert (task.name, task.baseline) == ("Scale", "baseline.py:scale_eager")
    assert not task.baseline_is_initial_candidate


def test_schema_error_names_task_yaml_line_and_field(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=task_yaml.replace("editable:", "editables:"))
    message = load_error(folder)
    assert f"{folder / 'task.yaml'}:4: editables: unknown key (did you mean 'editable'?)" \
        in message
    assert "missing required key 'editable'" in message


def test_missing_referenced_file(make_task) -> None:
    folder = make_task()
    (folder / "reference.py").unlink()
    message = load_error(folder)
    assert f"{folder / 'task.yaml'}:6: reference: file 'reference.py' not found" in message


def test_missing_editable_file_points_at_its_list_entry(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=task_yaml.replace("[kernel.py]", "[kernel.py, helpers.py]"))
    assert f"{folder / 'task.yaml'}:4: editable[1]: file 'helpers.py' not found" \
        in load_error(folder)


def test_file_outside_the_task_folder_is_refused(make_task, task_yaml: str, tmp_path) -> None:
    (tmp_path / "tasks" / "evil.py").parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tasks" / "evil.py").write_text("def f(x):\n    return x\n")
    folder = make_task(yaml=task_yaml.replace("inputs.py:make_inputs", "../../evil.py:f"))
    assert "inputs: '../../evil.py' is outside the task folder" in load_error(folder)


def test_entrypoint_must_be_editable(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=task_yaml.replace("entrypoint: kernel.py:scale",
                                              "entrypoint: reference.py:scale_reference"))
    message = load_error(folder)
    assert "task.yaml:5: entrypoint: the entrypoint's file 'reference.py' is not editable" \
        in message
    assert "add 'reference.py' to editable" in message


def test_syntax_error_in_reference_names_the_file_and_line(make_task) -> None:
    folder = make_task(files={"reference.py": "import torch\n\ndef scale_reference(x)\n"})
    message = load_error(folder)
    assert f"{folder / 'reference.py'}:3: syntax error" in message


def test_named_function_must_be_defined(make_task) -> None:
    folder = make_task(files={"inputs.py": "def build_inputs(case, seed, device):\n    pass\n"})
    message = load_error(folder)
    assert "task.yaml:7: inputs: inputs.py defines no 'make_inputs'" in message


def test_functions_defined_by_assignment_import_or_platform_branch_count(make_task) -> None:
    kernel = ("try:\n    from .fast import scale\nexcept ImportError:\n"
              "    def scale(x):\n        return x * 2\n")
    reference = "import math\nscale_reference = math.prod\n"
    folder = make_task(files={"kernel.py": kernel, "reference.py": reference})
    assert OperatorTaskFormat().load(folder, "triton2triton/scale").entrypoint == "kernel.py:scale"


def test_duplicate_case_names_across_sections(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=task_yaml.replace("{name: odd,", "{name: small,"))
    message = load_error(folder)
    assert "task.yaml:11: held_out_cases[0].name: case name 'small' is already used by " \
        "cases[0].name" in message


def test_several_problems_are_reported_together(make_task) -> None:
    folder = make_task(files={"inputs.py": "x = 1\n"})
    (folder / "reference.py").unlink()
    message = load_error(folder)
    assert "reference.py' not found" in message and "defines no 'make_inputs'" in message


def test_not_a_task_folder(tmp_path: Path, bare_host: PluginHost) -> None:
    with pytest.raises(ConfigError, match="not a task folder of any installed format"):
        load_task(tmp_path, "x", bare_host)


def test_format_recognises_task_folders(make_task, tmp_path: Path) -> None:
    fmt = OperatorTaskFormat()
    assert fmt.is_task_dir(make_task())
    assert not fmt.is_task_dir(tmp_path)


@pytest.mark.skipif(not REPO_TASKS.is_dir(), reason="no tasks/ in this checkout")
def test_repository_tasks_that_are_complete_load(bare_host: PluginHost) -> None:
    folders = sorted(p.parent for p in REPO_TASKS.glob("*/*/task.yaml"))
    for folder in folders:
        task = load_task(folder, folder.relative_to(REPO_TASKS).as_posix(), bare_host)
        assert task.cases
