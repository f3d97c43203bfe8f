"""Triton kernels compiled ahead, by a process that has no GPU (aka's builder, ``prebuild``).

Triton compiles a kernel at its first launch, for the active driver's target, into
``TRITON_CACHE_DIR`` under a key made of the target, the compiler's identity, the kernel's source
and its specialisation (argument dtypes, 16-byte alignment, integer values). A builder runs the
side's function on uninitialised CPU tensors of each case's shapes with Triton's driver replaced
by ``AheadDriver``: it names the evaluation GPU's target and launches nothing, so every kernel the
function would launch is compiled into the cache the side's runner reads, under the key that
runner computes on the GPU. Launchers (a small C module per signature) and the driver's C
utilities are built too where this host can link them. Anything that fails here only leaves the
compile to the runner.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any


def target_of(architecture: str) -> tuple[str, int, int] | None:
    """``sm_90`` -> ("cuda", 90, 32); AMD targets are not compiled ahead (None)."""
    match = re.fullmatch(r"sm_?(\d+)a?", architecture.strip())
    return ("cuda", int(match.group(1)), 32) if match else None


def install(architecture: str) -> bool:
    """Make ``AheadDriver`` Triton's active driver for ``architecture``; False if it cannot."""
    target = target_of(architecture)
    if target is None:
        return False
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    driver.set_active(AheadDriver(GPUTarget(*target)))
    # The driver's C utilities, a module compiled (with the host's C compiler) at the first
    # launch of any kernel: built here, they are in the runner's cache too.
    with contextlib.suppress(Exception):
        from triton.backends.nvidia.driver import CudaUtils

        CudaUtils()
    return True


def _launcher_cls(src: Any, metadata: Any) -> Any:
    """Build the real launcher where this host can (it is cached for the runner), then return
    one that launches nothing."""
    with contextlib.suppress(Exception):
        from triton.backends.nvidia.driver import CudaLauncher

        CudaLauncher(src, metadata)
    return lambda *args, **kwargs: None


class _Utils:
    def load_binary(self, *args: Any) -> tuple[int, int, int, int, int]:
        return 0, 0, 0, 0, 1024  # module, function, registers, spills, max threads per block

    def get_device_properties(self, device: int) -> dict[str, int]:
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "warpSize": 32,
                "max_num_regs": 65536}


def _driver_base() -> type:
    from triton.backends.driver import DriverBase

    return DriverBase


class AheadDriver(_driver_base()):  # type: ignore[misc]
    """Triton's driver for a process without a GPU: the evaluation GPU's target, no launches."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.utils = _Utils()
        self.launcher_cls = _launcher_cls

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        return None

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda

    def get_benchmarker(self) -> Any:
        # An autotuner "times" each configuration: one call each (which compiles it, launching
        # nothing), all equal; the runner tunes for real, from the compiled configurations.
        def bench(fn: Any, *args: Any, quantiles: Any = None, **kwargs: Any) -> Any:
            fn()
            return [1.0] * len(quantiles) if quantiles else 1.0

        return bench

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(1)

    def clear_cache(self, cache: Any) -> None:
        return None
