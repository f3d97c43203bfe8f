"""Exploits against the kernelbench task format (aka-tasks-kernelbench): the candidate's model
runs in its own confined process beside its own copy of the problem and the shims."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from aka_core import api

example = pytest.importorskip("aka_tasks_kernelbench.example")
pytest.importorskip("torch")


def test_a_model_new_that_rewrites_the_problem_in_its_process_gains_nothing(
        tmp_path: Path) -> None:
    # The candidate's process holds its own copy of problem.py and of the shims: rewriting
    # them there (a Model that does nothing, sizes shrunk) cannot reach the judge's reference.
    cheat = '''
    import torch

    from . import _aka_task, problem


    class ModelNew(problem.Model):
        def forward(self, x):
            problem.Model.forward = lambda self, x: torch.zeros(1)
            problem.batch_size = 1
            _aka_task.reference = lambda **inputs: torch.zeros(1)
            return torch.zeros(x.shape[0], self.linear.out_features)
    '''
    folder = example.write(tmp_path / "problems" / "linear_relu")
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "model_new.py").write_text(textwrap.dedent(cheat))
    result = api.evaluate_candidate(folder, candidate, device="cpu")
    assert result.status == "completed" and not result.pass_correctness
    assert result.score == 0
