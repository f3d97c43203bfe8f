"""The red-team suite on the CPU: every exploit meaningful without a GPU must end unpaid, with
the verdict its exploit.yaml names, and must leave no trace on the evaluator's code, the tasks,
the stored solutions or the startup hooks. An honest solution is evaluated after all of them and
must still be accepted. (All exploits run on a GPU through bench/redteam_bench.py.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("aka_redteam_harness",
                                               Path(__file__).with_name("harness.py"))
harness = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = harness
_spec.loader.exec_module(harness)

pytestmark = pytest.mark.slow

CPU_EXPLOITS = harness.load_exploits("cpu")


def test_the_suite_is_large_and_covers_every_class() -> None:
    every = harness.load_exploits()
    classes = {e.attack_class for e in every}
    assert len(every) >= 50
    assert {"forged_result_channel", "patched_judge", "persistent_poisoning", "reads_secrets",
            "escape_confinement", "task_rules", "deadlines", "knows_checked_calls",
            "work_escapes_window", "slows_baseline", "returns_cached_answer",
            "output_contract"} <= classes


@pytest.mark.parametrize("exploit", CPU_EXPLOITS, ids=[e.name for e in CPU_EXPLOITS])
def test_exploit_is_caught(exploit: harness.Exploit) -> None:
    verdict = harness.evaluate_exploit(exploit, device="cpu")
    assert not verdict["problems"], verdict


def test_an_honest_solution_is_still_accepted_after_the_suite() -> None:
    from aka_core import api

    result = api.evaluate_candidate(harness.ROOT / "tasks" / "triton2triton" / "gelu",
                                    harness.ROOT / "tests" / "solutions" / "triton2triton" / "gelu",
                                    device="cpu")
    assert result.pass_correctness is True
    assert result.candidate_accepted is True
