"""Which accelerator this host has, asked once in a subprocess (the lifecycle never holds a GPU)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

_PROBE = r"""
import json
try:
    import torch
except Exception as exc:
    print(json.dumps({"torch": None, "error": str(exc)})); raise SystemExit
info = {"torch": torch.__version__, "gpu": None}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    hip = getattr(torch.version, "hip", None)
    arch = (getattr(p, "gcnArchName", "") or "").split(":")[0] if hip else f"sm_{p.major}{p.minor}"
    info["gpu"] = {"name": p.name, "vendor": "amd" if hip else "nvidia", "architecture": arch,
                   "count": torch.cuda.device_count(),
                   "compute_capability": None if hip else float(f"{p.major}.{p.minor}")}
print(json.dumps(info))
"""


@functools.cache
def probe(python: str = sys.executable) -> dict[str, Any]:
    """{"torch": version or None, "gpu": {name, vendor, architecture, count} or None}."""
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                             check=False)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
        return {"torch": None, "gpu": None, "error": f"device probe failed: {exc}"}


def gpu_visible_quick() -> bool | None:
    """A cheap answer without importing torch: True/False when sure, None when a probe is needed."""
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", os.environ.get("HIP_VISIBLE_DEVICES"))
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd"):
        return True
    return None


def no_gpu_device_files() -> bool:
    """No device file of an NVIDIA, AMD or WSL GPU exists: ``auto`` can pick the CPU without a
    probe (a ~2 s subprocess importing torch). ``cuda`` still probes before it refuses."""
    import glob
    import os

    return not (glob.glob("/dev/nvidia*") or os.path.exists("/dev/kfd")
                or os.path.exists("/dev/dxg"))
