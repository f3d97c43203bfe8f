"""The kernelbench task format on problems written here (no other project's files)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from aka_tasks_kernelbench import KernelBenchFormat, aka_register_tasks, example
from aka_tasks_kernelbench.example import FASTER, PROBLEM

from aka_core.plugin import ConfigError
from aka_core.testing import TaskFormatContract

pytest.importorskip("torch")

NO_RELU = FASTER.replace(".clamp_min(0)", "")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "kb-cache"
    monkeypatch.setenv("AKA_KERNELBENCH_CACHE", str(folder))
    return folder


def problem_folder(root: Path, name: str = "linear_relu", **files: str) -> Path:
    return example.write(root / "problems" / "level1" / name, **files)


def test_a_problem_folder_is_a_task_and_the_users_folder_is_left_alone(tmp_path: Path,
                                                                      cache: Path) -> None:
    folder = problem_folder(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    fmt = KernelBenchFormat()
    assert fmt.is_task_dir(folder)
    assert not fmt.is_task_dir(folder.parent)  # the level folder holds no problem file itself
    task = fmt.load(folder, "level1/linear_relu")
    assert sorted(p.name for p in folder.iterdir()) == before
    assert task.root.parent == cache
    assert sorted(p.name for p in task.root.iterdir()) == [
        "_aka_entry.py", "_aka_task.py", "model_new.py", "problem.py"]
    assert task.editable == ("model_new.py",) and task.family == "level1"
    assert task.cases[0].params == {"batch_size": 8, "in_features": 32, "out_features": 16}
    assert task.held_out_draws is not None
    assert task.held_out_draws.params["batch_size"] == {"range": [4, 8]}
    # Loading again maps to the same folder; a changed problem to another one.
    assert fmt.load(folder, "level1/linear_relu").root == task.root
    (folder / "19_Linear_ReLU.py").write_text(PROBLEM.replace("batch_size = 8", "batch_size = 6"))
    assert fmt.load(folder, "level1/linear_relu").root != task.root


def test_a_given_model_new_is_where_the_agent_starts(tmp_path: Path) -> None:
    folder = problem_folder(tmp_path, **{"model_new.py": FASTER})
    task = KernelBenchFormat().load(folder, "level1/linear_relu")
    assert (task.root / "model_new.py").read_text() == FASTER


@pytest.mark.parametrize(("files", "fragment"), [
    ({"other.py": PROBLEM}, None),  # two problem files: not a task folder of this format
    ({"model_new.py": "class ModelNew(:\n"}, "does not parse"),
])
def test_bad_problem_folders_get_clear_answers(tmp_path: Path, files: dict[str, str],
                                               fragment: str | None) -> None:
    folder = problem_folder(tmp_path, **files)
    fmt = KernelBenchFormat()
    if fragment is None:
        assert not fmt.is_task_dir(folder)
        with pytest.raises(ConfigError, match="no KernelBench problem file"):
            fmt.load(folder, "level1/linear_relu")
        return
    with pytest.raises(ConfigError, match=fragment):
        fmt.load(folder, "level1/linear_relu")


def test_a_problem_missing_get_init_inputs_names_it(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    text = PROBLEM.replace("def get_init_inputs():", "def init_inputs():") + (
        "\n# class Model, def get_inputs, def get_init_inputs\n")
    (folder / "p.py").write_text(text)
    with pytest.raises(ConfigError, match="get_init_inputs"):
        KernelBenchFormat().load(folder, "p")


def test_the_shims_give_seeded_inputs_and_the_same_weights_to_model_and_model_new(
        tmp_path: Path) -> None:
    import torch

    from aka_core.plugin import PythonBackend

    folder = problem_folder(tmp_path, **{"model_new.py": FASTER})
    task = KernelBenchFormat().load(folder, "level1/linear_relu")
    backend = PythonBackend()
    make = backend.load_callable(task.root, task.inputs, "aka_kb_test_task")
    reference = backend.load_callable(task.root, task.reference, "aka_kb_test_task")
    candidate = backend.load_callable(task.root, task.entrypoint, "aka_kb_test_task")
    state = torch.random.get_rng_state()
    small = make({**task.cases[0].params, "batch_size": 3}, 7, "cpu")
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is untouched
    assert small["x0"].shape == (3, 32) and small["kb_batch_size"] == 3
    assert torch.equal(small["x0"], make({**task.cases[0].params, "batch_size": 3}, 7, "cpu")["x0"])
    assert not torch.equal(small["x0"], make({**task.cases[0].params, "batch_size": 3}, 8, "cpu")["x0"])
    torch.testing.assert_close(candidate(**small), reference(**small))


def run_end_to_end(tmp_path: Path, model_new: str) -> object:
    from aka_core.testing import api

    folder = problem_folder(tmp_path)
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "model_new.py").write_text(textwrap.dedent(model_new))
    return api.evaluate_candidate(folder, candidate, device="cpu")


def test_a_correct_model_new_is_accepted_end_to_end_on_the_cpu(tmp_path: Path) -> None:
    result = run_end_to_end(tmp_path, FASTER)
    assert result.status == "completed", result.error
    assert result.pass_correctness and result.candidate_accepted


def test_a_wrong_model_new_fails_correctness_end_to_end(tmp_path: Path) -> None:
    result = run_end_to_end(tmp_path, NO_RELU)
    assert result.status == "completed" and not result.pass_correctness
    assert not result.candidate_accepted and result.score == 0


class TestKernelBenchContract(TaskFormatContract):
    @pytest.fixture
    def record(self):  # type: ignore[no-untyped-def]
        return aka_register_tasks()[0]

    @pytest.fixture
    def task_folder(self, tmp_path: Path) -> Path:
        return problem_folder(tmp_path)

