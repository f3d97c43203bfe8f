"""Whether a confined agent still has the GPU (``agent_sandbox``): PyTorch run inside the
bubblewrap sandbox an agent's CLI gets (read-only ``/dev`` with the GPU's devices bound in, a
sized ``/dev/shm``, read-only or sized hidden folders), one kernel launched and read back, then
a write to ``/dev`` and 600 MiB into ``/dev/shm`` tried.

    python3 bench/agent_sandbox_gpu_probe.py

Prints the sandbox's answer (one JSON line); exit 0 where CUDA worked inside.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from aka_core.kits import agent_sandbox

INSIDE = """
import json, torch
seen = {"cuda": torch.cuda.is_available()}
if seen["cuda"]:
    seen["sum"] = float(torch.arange(1024, device="cuda", dtype=torch.float32).sum().item())
try:
    open("/dev/aka-probe", "w").write("x")
    seen["dev"] = "written"
except OSError as exc:
    seen["dev"] = "denied: " + exc.strerror
try:
    with open("/dev/shm/aka-probe", "wb") as handle:
        for _ in range(600):
            handle.write(b"x" * (1 << 20))
    seen["shm"] = "filled"
except OSError as exc:
    seen["shm"] = "denied: " + exc.strerror
print(json.dumps(seen))
"""


def main() -> int:
    bwrap = agent_sandbox.bwrap_path()
    if bwrap is None:
        print(json.dumps({"skipped": "no bwrap on this host"}))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        workspace, home = Path(folder) / "workspace", Path(folder) / "home"
        workspace.mkdir()
        home.mkdir()
        plan = agent_sandbox.plan(workspace=workspace, private_home=home, protected=[],
                                  programs=[Path(sys.executable)])
        argv = agent_sandbox.wrap([sys.executable, "-c", INSIDE], plan, bwrap)
        done = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, timeout=120)
    print(json.dumps({"devices": list(plan.devices),
                      "in_memory_folders": agent_sandbox.describe(plan, bwrap)
                      .get("in_memory_folders"), "exit": done.returncode}))
    print(done.stdout.strip()[-2000:] or done.stderr.strip()[-2000:])
    return 0 if done.returncode == 0 and '"cuda": true' in done.stdout else 1


if __name__ == "__main__":
    raise SystemExit(main())
