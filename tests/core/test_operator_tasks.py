"""Loading operator tasks: defaults, and the static checks a task author sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from aka_core.builtin.operator_tasks import OperatorTaskFormat, load_task
from aka_core.errors import ConfigError
from aka_core.models import Case, Tolerance
from aka_core.plugin.host import PluginHost
from aka_core.testing import TaskFormatContract

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


@pytest.mark.parametrize("name, says", [
    ('"kernel\\0.py"', "cannot be a file name"),  # a NUL (YAML's escape): no path holds one
    ("a" * 300 + ".py", "cannot be a file name"),    # a name over the file system's 255 bytes
])
def test_an_editable_that_no_file_can_have_is_named(make_task, task_yaml: str, name: str,
                                                   says: str) -> None:
    """An editable path that is no possible file name made every load of the task a traceback
    (``ValueError: embedded null byte``, ``OSError: File name too long``): `aka validate`
    crashed, and the reward service answered each request for the task with a 500."""
    folder = make_task(yaml=task_yaml.replace("[kernel.py]", f"[kernel.py, {name}]"))
    message = load_error(folder)
    assert f"{folder / 'task.yaml'}:4: editable[1]:" in message and says in message


def test_a_reference_nested_past_the_parser_is_named(make_task) -> None:
    """A source Python's parser gives up on (a sum of 200,000 terms: ``RecursionError`` while
    it builds the tree) made the task's load a traceback, not a problem naming the file."""
    body = "+".join(["x"] * 200_000)
    folder = make_task(files={"reference.py": f"def scale_reference(x):\n    return {body}\n"})
    message = load_error(folder)
    assert f"{folder / 'reference.py'}" in message and "too deeply" in message


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


DRAWS = "held_out_draws:\n  count: 2\n  params:\n    N: {range: [17, 4000]}\n"


def with_draws(task_yaml: str, draws: str = DRAWS) -> str:
    """``task_yaml`` with its held-out case replaced by ``draws`` (whose params start on line 13)."""
    held_out = "held_out_cases:\n  - {name: odd, params: {N: 17}}\n"
    assert held_out in task_yaml
    return task_yaml.replace(held_out, draws)


def test_cost_draws_and_rules_load(make_task, task_yaml: str) -> None:
    yaml = with_draws(task_yaml, DRAWS.replace("4000]}", "4000], multiple_of: 128}")) + \
        'cost: {bytes: "8 * N", flops: "max(N, 1) * ceil(N / 2)"}\n' + \
        "rules: {torch_compute: forbidden, compute_precision: float32}\n"
    task = OperatorTaskFormat().load(make_task(yaml=yaml), "triton2triton/scale")
    assert task.cost is not None and task.cost.bytes == "8 * N"
    assert task.held_out_draws is not None
    assert task.held_out_draws.params == {"N": {"range": [17, 4000], "multiple_of": 128}}
    assert (task.rules.torch_compute, task.rules.compute_precision) == ("forbidden", "float32")


def test_cost_expression_that_does_not_parse(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=task_yaml + 'cost: {bytes: "8 * N if N else 0", flops: "N"}\n')
    message = load_error(folder)
    assert "task.yaml:17: cost.bytes: '8 * N if N else 0' is not a cost expression: IfExp is not " \
        "allowed" in message
    assert "cost.flops" not in message


def test_cost_expression_must_evaluate_for_every_case(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=task_yaml + 'cost: {bytes: "2 * N", flops: "2 * N * K"}\n')
    message = load_error(folder)
    assert "task.yaml:17: cost.flops: cannot be evaluated for case 'small' (and 2 more): unknown " \
        "name 'K' (the case's params are N)" in message
    assert "cost.bytes" not in message


def test_cost_expression_failing_for_one_case_names_it(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=task_yaml + 'cost: {bytes: "N * 64 // (N - 4)"}\n')
    assert "cost.bytes: cannot be evaluated for smoke case 'tiny': integer division or modulo by " \
        "zero" in load_error(folder)


def test_cost_expression_must_evaluate_for_the_held_out_draws(make_task, task_yaml: str) -> None:
    draws = DRAWS.replace("[17, 4000]", "[1, 4000]") + "    dtype: {choice: [float32, float9]}\n"
    yaml = with_draws(task_yaml.replace("{N: 16}", "{N: 16, dtype: float32}")
                      .replace("{N: 4}", "{N: 4, dtype: float32}"), draws)
    folder = make_task(yaml=yaml + 'cost: {bytes: "N * bytes_of(dtype)", flops: "N // (N - 1)"}\n')
    message = load_error(folder)
    assert "cost.flops: cannot be evaluated for held-out draw N=1, dtype=float32 (and 1 more): " \
        "integer division or modulo by zero" in message
    assert "cost.bytes: cannot be evaluated for held-out draw N=1, dtype=float9 (and 1 more): " \
        "bytes_of: unknown dtype 'float9'" in message


def test_held_out_draw_range_must_not_be_empty(make_task, task_yaml: str) -> None:
    folder = make_task(yaml=with_draws(task_yaml, DRAWS.replace("[17, 4000]", "[4000, 17]")))
    assert "task.yaml:13: held_out_draws.params.N: range [4000, 17] is empty: its low end is above " \
        "its high end" in load_error(folder)


def test_held_out_draw_range_must_hold_a_multiple(make_task, task_yaml: str) -> None:
    draws = DRAWS.replace("[17, 4000]}", "[129, 255], multiple_of: 128}")
    message = load_error(make_task(yaml=with_draws(task_yaml, draws)))
    assert "task.yaml:13: held_out_draws.params.N: no multiple of 128 lies in the range [129, 255]" \
        in message
    assert "widen the range or change multiple_of" in message


def test_held_out_draws_set_the_params_of_the_cases(make_task, task_yaml: str) -> None:
    draws = DRAWS.replace("    N: {range: [17, 4000]}\n", "    M: {range: [17, 4000]}\n    eps: 1.0e-6\n")
    message = load_error(make_task(yaml=with_draws(task_yaml, draws)))
    assert "task.yaml:12: held_out_draws.params: draws no N, which the cases set" in message
    assert "task.yaml:12: held_out_draws.params: draws M, eps, which no case sets" in message


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


class TestOperatorFormatContract(TaskFormatContract):
    @pytest.fixture
    def record(self):  # type: ignore[no-untyped-def]
        from aka_core.builtin.hooks import aka_register_tasks

        return aka_register_tasks()[0]

    @pytest.fixture
    def task_folder(self, tmp_path: Path) -> Path:
        from aka_core.testing.fixtures import write_task

        return write_task(tmp_path / "tasks")
