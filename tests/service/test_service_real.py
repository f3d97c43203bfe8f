"""The reward service with the real judge on the CPU: `aka serve` as a user starts it, verl's
reward function over it (examples/verl_reward_cpu.py), and the statuses a trainer gets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aka_core.service.verl import extract_files

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_the_verl_example_runs_on_the_cpu() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "verl_reward_cpu.py")],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "'status': 'scored'" in lines[1] and "'accepted': True" in lines[1]
    assert "'failure_kind': 'correctness'" in lines[2]
    assert "'failure_kind': 'no_code'" in lines[3]
    assert lines[4] == ("batch: [('scored', 0.0), ('candidate_failure', 0.0), "
                        "('candidate_failure', 0.0)]")


def test_code_blocks_become_the_candidates_files() -> None:
    response = ("Plan...\n```python\nprint('draft')\n```\nFinal:\n```python\nimport torch\n```\n"
                "```cuda kernel.cu\n__global__ void k() {}\n```\n"
                "```\n// file: include/util.cuh\n#pragma once\n```")
    assert extract_files(response) == {"kernel.py": "import torch\n",
                                       "kernel.cu": "__global__ void k() {}\n",
                                       "include/util.cuh": "#pragma once\n"}
    assert extract_files("no code at all") == {}
    assert extract_files("```python\nx = 1\n```", main_file="solution.py") == {
        "solution.py": "x = 1\n"}


def test_pre_started_evaluations_judge_as_fresh_ones(make_service: object) -> None:
    """With ``prestart`` each evaluation starts from a judge and runners started ahead: the real
    judge on the CPU accepts the stored solution and rejects a wrong one, as fresh ones do."""
    from aka_core.api import ServiceClient

    service = make_service(workers=1, evaluator=None, prestart=True)  # type: ignore[operator]
    solution = (ROOT / "tests" / "solutions" / "triton2triton" / "gelu" / "kernel.py").read_text()
    wrong = "import torch\n\n\ndef gelu(x):\n    return x * 0.5\n"
    with ServiceClient(service.url) as client:
        results = [client.evaluate("triton2triton/gelu", {"kernel.py": source})
                   for source in (solution, wrong, solution)]
    assert [r["status"] for r in results] == ["scored", "candidate_failure", "scored"]
    assert results[0]["accepted"] and results[2]["accepted"]
    assert results[1]["failure"]["kind"] == "correctness"
    warm = [r["record"]["evaluation"].get("warm") for r in results]
    assert warm == [{"used": True}] * 3, warm
    # Where each request's seconds went outside the judge's phases, for a reader of the result.
    for r in results:
        line = r["timeline"]
        assert line["started_ahead"] is True
        spans = [line[k] for k in ("queued_s", "handed_s", "evaluation_s", "exit_s")]
        assert all(isinstance(v, float) and v >= 0 for v in spans), line
        phases = sum(r["record"]["evaluation"]["phases"].values())
        assert line["evaluation_s"] >= phases - 0.01, (line, phases)
