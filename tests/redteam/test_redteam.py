"""The red-team suite on the CPU: every exploit meaningful without a GPU must end unpaid, with
the verdict its exploit.yaml names, and must leave no trace on the evaluator's code, the tasks,
the stored solutions or the startup hooks. An honest solution is evaluated after all of them and
must still be accepted. (All exploits run on a GPU through `bench/gpu_bench.py --sections redteam`.)"""

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


@pytest.fixture(autouse=True, scope="module")
def kernel_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of compiled kernels holding an entry (as the baseline's would) for exploits to
    attack: the harness fails any exploit that changes it."""
    from aka_core.evaluation import kernel_cache

    root = tmp_path_factory.mktemp("kernel-store")
    compiled = root.parent / f"{root.name}-compiled" / "triton" / "abc"
    compiled.mkdir(parents=True)
    (compiled / "_gelu_kernel.cubin").write_bytes(b"\x7fELF a compiled kernel")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(kernel_cache.ENV, str(root))
        assert kernel_cache.save("0" * 64, compiled.parent.parent, {})["saved"]
        yield root


def test_the_suite_is_large_and_covers_every_class() -> None:
    every = harness.load_exploits()
    classes = {e.attack_class for e in every}
    assert len(every) >= 50
    assert {"forged_result_channel", "patched_judge", "persistent_poisoning", "reads_secrets",
            "escape_confinement", "task_rules", "deadlines", "knows_checked_calls",
            "work_escapes_window", "slows_baseline", "returns_cached_answer",
            "output_contract", "fools_the_comparison"} <= classes


@pytest.mark.parametrize("exploit", CPU_EXPLOITS, ids=[e.name for e in CPU_EXPLOITS])
def test_exploit_is_caught(exploit: harness.Exploit) -> None:
    verdict = harness.evaluate_exploit(exploit, device="cpu")
    if verdict["problems"] and exploit.known_limit:
        pytest.xfail(f"known limit: {exploit.known_limit}")
    assert not verdict["problems"], verdict


def test_an_honest_solution_is_still_accepted_after_the_suite() -> None:
    from aka_core import api

    result = api.evaluate_candidate(harness.ROOT / "tasks" / "triton2triton" / "gelu",
                                    harness.ROOT / "tests" / "solutions" / "triton2triton" / "gelu",
                                    device="cpu")
    assert result.pass_correctness is True
    assert result.candidate_accepted is True
