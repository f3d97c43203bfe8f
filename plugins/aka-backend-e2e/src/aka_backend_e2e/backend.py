"""The ``e2e`` backend: what the core asks of a backend, for e2e tasks.

The e2e judge loads kernel trees itself (inside each engine's confined process), so the backend's
part is small: the device's facts and whether this host can serve (``aka smoke``). Kernel trees are
Python (PyTorch, Triton), loaded like the ``python`` backend's callables.
"""

from __future__ import annotations

import importlib.util

from aka_core.plugin import BackendReadiness, PythonBackend


class E2EBackend(PythonBackend):
    name = "e2e"

    def worker_environment(self, device: str) -> dict[str, str]:
        return {}

    def readiness(self) -> BackendReadiness:
        try:
            import torch
        except ImportError as exc:
            return BackendReadiness(build=False, run=False, detail=f"PyTorch missing: {exc}")
        engines = ["builtin"] + [name for name in ("vllm", "sglang")
                                 if importlib.util.find_spec(name) is not None]
        gpu = torch.cuda.is_available()
        where = "on the GPU" if gpu else "on the CPU (tiny models only; nothing paid)"
        return BackendReadiness(build=True, run=True,
                                detail=f"engines {', '.join(engines)} {where}")
