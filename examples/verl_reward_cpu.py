"""verl's reward function backed by `aka serve`, on a CPU.

Starts the reward service (one CPU slot, a temporary state folder, any free port), scores three
model responses to the task triton2triton/gelu with ``aka_core.service.verl.compute_score`` (what
verl calls for each sample), then the same three as one batch (``compute_score_batch``), and
stops the service. On a CPU the candidate is checked through Triton's interpreter and not timed,
so a correct candidate is ``scored`` with reward 0 and ``measured: false``; a wrong one is a
``candidate_failure``; a response without code is one too, without an evaluation.

    python examples/verl_reward_cpu.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = "triton2triton/gelu"


def start_service(state: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "aka_core.cli", "serve", "--tasks",
                             str(ROOT / "tasks"), "--state", str(state), "--port", "0",
                             "--device", "cpu"])
    deadline = time.monotonic() + 60
    while not (state / "service.json").is_file():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("aka serve did not start")
        time.sleep(0.2)
    return proc


def main() -> int:
    from aka_core.service.verl import compute_score, compute_score_batch

    correct = (ROOT / "tests" / "solutions" / TASK / "kernel.py").read_text()
    responses = [
        f"Here is a faster GELU:\n```python\n{correct}```\n",
        "```python\nimport torch\n\ndef gelu(x):\n    return x * 0.5\n```",
        "I would fuse the kernel, but I ran out of time.",
    ]
    with tempfile.TemporaryDirectory(prefix="aka-serve-example-") as tmp:
        state = Path(tmp) / "state"
        service = start_service(state)
        os.environ["AKA_SERVICE_URL"] = json.loads((state / "service.json").read_text())["url"]
        try:
            for i, response in enumerate(responses):
                score = compute_score("aka", response, TASK, {"index": i})
                print(f"sample {i}: {score}")
            batch = compute_score_batch(["aka"] * 3, responses, [TASK] * 3,
                                        [{"index": i} for i in range(3)])
            print("batch:", [(s["status"], s["score"]) for s in batch])
        finally:
            service.terminate()
            service.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
