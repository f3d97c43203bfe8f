"""Exploits against the correctness comparison itself, on tasks written for them (no task of the
corpus has integers past float32's digits today; the next one must not be open to this)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from aka_core import api

pytest.importorskip("torch")

TASK_YAML = """\
format: operator
family: redteam
backend: python
description: Paged-KV slot ids (int64) of every token, in a cache of more than 2^24 slots.
editable: [kernel.py]
entrypoint: kernel.py:slot_ids
reference: reference.py:slot_ids_reference
inputs: inputs.py:make_inputs
cases:
  - {name: b64_l512, params: {B: 64, L: 512, BS: 16, NB: 4194304}}
smoke_case: {name: tiny, params: {B: 8, L: 256, BS: 16, NB: 4194304}}
tolerance:
  int64: {rtol: 0.0, atol: 0.0}
requires: {cpu_interpreter: true}
timeouts: {compile_seconds: 60, correctness_seconds: 60, timing_seconds: 60}
instructions: |
  slot[b, t] = block_table[b, t // BS] * BS + t % BS, int64, exact.
"""
INPUTS = """\
import torch


def make_inputs(case: dict, seed: int, device: str) -> dict:
    B, L, BS, NB = (int(case[k]) for k in ("B", "L", "BS", "NB"))
    g = torch.Generator(device=device).manual_seed(seed)
    blocks = torch.randint(0, NB, (B, (L + BS - 1) // BS), generator=g, device=device)
    return {"block_table": blocks, "BS": BS, "L": L}
"""
RIGHT = """\
import torch


def {name}(block_table: torch.Tensor, BS: int, L: int) -> torch.Tensor:
    t = torch.arange(L, device=block_table.device)
    return block_table[:, t // BS] * BS + t % BS
"""
# The slot arithmetic in float32: about half the ids are off by one or two above 2**24, and a
# comparison made in float32 (as the judge's exact comparison once was) sees them all equal.
IN_FLOAT32 = """\
import torch


def slot_ids(block_table: torch.Tensor, BS: int, L: int) -> torch.Tensor:
    t = torch.arange(L, device=block_table.device)
    slots = block_table[:, t // BS].float() * BS + (t % BS).float()
    return slots.to(torch.int64)
"""


def write_task(root: Path) -> Path:
    task = root / "slot_ids"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text(TASK_YAML)
    (task / "inputs.py").write_text(INPUTS)
    (task / "reference.py").write_text(RIGHT.format(name="slot_ids_reference"))
    (task / "kernel.py").write_text(RIGHT.format(name="slot_ids"))
    return task


@pytest.mark.parametrize(("kernel", "passes"), [(IN_FLOAT32, False), (RIGHT, True)],
                         ids=["integers_rounded_through_float32", "control"])
def test_integers_past_float32s_digits_are_compared_exactly(
        tmp_path: Path, kernel: str, passes: bool) -> None:
    task = write_task(tmp_path / "tasks")
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(textwrap.dedent(kernel).format(name="slot_ids"))
    result = api.evaluate_candidate(task, candidate, device="cpu", measure_performance=False)
    assert result.status == "completed"
    assert result.pass_correctness is passes
    if not passes:
        checks = result.evaluation.correctness.checks
        assert "elements outside atol=0.0" in checks[0].reason


# A wrong candidate whose runner says, after each call, that an input which is a number (``BS``)
# came back as a tensor. On a CPU the judge compares the inputs a runner reports with its own,
# and a number has no bytes to compare: the judge raised, and the evaluation ended as an
# infra_error, retried in place of the candidate's zero.
FORGED_INPUTS_AFTER = """\
import sys

import torch

_runner = sys.modules["aka_core.evaluation.runner"]
_protocol = sys.modules["aka_core.evaluation.protocol"]
_reply = _runner.Runner.reply


def _forged(self, **message):
    if isinstance(message.get("inputs_after"), dict):
        message["inputs_after"]["BS"] = _protocol.encode_cpu(torch.zeros(4))
    return _reply(self, **message)


_runner.Runner.reply = _forged


def slot_ids(block_table: torch.Tensor, BS: int, L: int) -> torch.Tensor:
    return torch.zeros(block_table.shape[0], L, dtype=torch.int64)
"""


def test_a_number_reported_back_as_a_changed_tensor_input_is_no_judge_failure(
        tmp_path: Path) -> None:
    task = write_task(tmp_path / "tasks")
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(FORGED_INPUTS_AFTER)
    result = api.evaluate_candidate(task, candidate, device="cpu", measure_performance=False)
    failure = result.evaluation.failure
    assert result.status == "completed", failure
    assert failure is not None and failure.kind.value == "correctness", failure
    assert result.pass_correctness is False and not result.candidate_accepted
