"""The replay agent: the contract, copying, missing folders and refused escapes."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
from aka_agent_replay import aka_register_agents

from aka_core.testing import AgentContract

make = aka_register_agents()[0].make
"""The agent as a run builds it: options typed through the record's options class."""

SOLUTION = "def scale_add(x, y, alpha):\n    return (y * alpha).add_(x)\n"


def write_solution(source: Path, task_id: str, files: dict[str, str]) -> Path:
    folder = source / task_id
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


class TestReplayContract(AgentContract):
    record = aka_register_agents()[0]

    @pytest.fixture
    def options(self, tmp_path: Path) -> dict[str, str]:
        write_solution(tmp_path / "solutions", self.task_id, {"kernel.py": SOLUTION})
        return {"source": str(tmp_path / "solutions")}


class TestReplayMissingContract(AgentContract):
    """With no solution folder the agent fails cleanly (the contract still holds)."""

    record = aka_register_agents()[0]

    @pytest.fixture
    def options(self, tmp_path: Path) -> dict[str, str]:
        (tmp_path / "empty").mkdir(exist_ok=True)
        return {"source": str(tmp_path / "empty")}


def test_copies_the_task_folder(tmp_path: Path, make_invocation) -> None:
    invocation = make_invocation("demo/scale_add")
    write_solution(tmp_path / "solutions", "demo/scale_add",
                   {"kernel.py": SOLUTION, "sub/helpers.py": "X = 1\n"})
    execution = make({"source": str(tmp_path / "solutions")}).run(invocation)
    assert execution.status == "completed", execution.message
    assert (invocation.workspace / "kernel.py").read_text() == SOLUTION
    assert (invocation.workspace / "sub" / "helpers.py").read_text() == "X = 1\n"
    assert "kernel.py" in execution.message and "sub/helpers.py" in execution.message


def test_relative_source_is_relative_to_the_current_directory(
    tmp_path: Path, make_invocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    invocation = make_invocation()
    write_solution(tmp_path / "solutions", invocation.task.id, {"kernel.py": SOLUTION})
    monkeypatch.chdir(tmp_path)
    agent = make({"source": "solutions"})
    monkeypatch.chdir("/")
    assert agent.run(invocation).status == "completed"
    assert (invocation.workspace / "kernel.py").read_text() == SOLUTION


def test_missing_folder_fails_with_a_clear_message(tmp_path: Path, make_invocation) -> None:
    invocation = make_invocation()
    (tmp_path / "other_tasks").mkdir()
    execution = make({"source": str(tmp_path / "other_tasks")}).run(invocation)
    assert execution.status == "failed"
    assert "no solution folder for task demo/scale_add" in execution.message


def test_missing_keep_completes_without_changes(tmp_path: Path, make_invocation) -> None:
    invocation = make_invocation()
    before = (invocation.workspace / "kernel.py").read_text()
    (tmp_path / "other_tasks").mkdir()
    agent = make({"source": str(tmp_path / "other_tasks"), "missing": "keep"})
    execution = agent.run(invocation)
    assert execution.status == "completed"
    assert "left unchanged" in execution.message
    assert (invocation.workspace / "kernel.py").read_text() == before


@pytest.mark.parametrize("missing", ["fail", "keep"])
def test_a_source_that_is_not_a_folder_is_an_error_of_the_options(
    tmp_path: Path, missing: str
) -> None:
    from aka_core.plugin import ConfigError

    with pytest.raises(ConfigError, match=r"source .*nowhere.* is not a folder"):
        make({"source": str(tmp_path / "nowhere"), "missing": missing})


def test_refuses_a_task_id_with_dotdot(tmp_path: Path, make_invocation) -> None:
    invocation = make_invocation()
    write_solution(tmp_path, "outside", {"kernel.py": "stolen = True\n"})
    (tmp_path / "solutions").mkdir()
    evil = attrs.evolve(invocation, task=attrs.evolve(invocation.task, id="../outside"))
    execution = make({"source": str(tmp_path / "solutions")}).run(evil)
    assert execution.status == "failed"
    assert "refusing task id" in execution.message
    assert "stolen" not in (invocation.workspace / "kernel.py").read_text()


def test_refuses_writing_through_a_workspace_symlink(tmp_path: Path, make_invocation) -> None:
    invocation = make_invocation()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, invocation.workspace / "link")
    write_solution(tmp_path / "solutions", invocation.task.id,
                   {"kernel.py": SOLUTION, "link/evil.py": "x = 1\n"})
    execution = make({"source": str(tmp_path / "solutions")}).run(invocation)
    assert execution.status == "failed"
    assert "outside the workspace" in execution.message
    assert not (outside / "evil.py").exists()
    assert (invocation.workspace / "kernel.py").read_text() != SOLUTION  # nothing copied


def test_skips_symlinks_in_the_source(tmp_path: Path, make_invocation) -> None:
    invocation = make_invocation()
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    folder = write_solution(tmp_path / "solutions", invocation.task.id, {"kernel.py": SOLUTION})
    os.symlink(secret, folder / "secret.txt")
    execution = make({"source": str(tmp_path / "solutions")}).run(invocation)
    assert execution.status == "completed"
    assert not (invocation.workspace / "secret.txt").exists()
    assert "skipped (not regular files): secret.txt" in execution.message
