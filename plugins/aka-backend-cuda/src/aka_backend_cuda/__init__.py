"""The ``cuda`` backend: CUDA C++ candidates built with nvcc, called from Python through ctypes.

A candidate is a Python entry point (``kernel.py:fn``, the operator-task contract) that builds its
``.cu`` sources when imported and calls their ``extern "C"`` launchers::

    from aka_backend_cuda import load

    lib = load("kernel.cu", functions=["gelu_launch"])

    def gelu(x):
        out = torch.empty_like(x)
        lib.gelu_launch(x, out, x.numel())   # extern "C" int gelu_launch(const void*, void*,
        return out                            #     int64_t, cudaStream_t)

``load`` builds with nvcc for the visible GPU's architecture (``sm_90`` on an H200) into a shared
library cached by content (``aka_core.kits.native``), so an unchanged candidate is never rebuilt;
compile errors name the ``.cu`` file and line. Without a GPU, a compile-only evaluation builds
for the task's architecture and checks the library loads and exports the functions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import attrs

from aka_backend_cuda.toolchain import (
    DEFAULT_ARCHITECTURE,
    build_command,
    device_architecture,
    find_nvcc,
    nvcc_version,
    require_nvcc,
)
from aka_core.plugin import BackendReadiness, BackendSpec, DeviceInfo, hookimpl, native

__all__ = ["CudaBackend", "load"]


def load(*sources: str | os.PathLike[str], flags: Sequence[str] = (),
         functions: Sequence[str] = ()) -> native.Library:
    """Build ``sources`` (relative to the calling module's folder) and load the library.

    ``flags`` go to nvcc after aka's (``-O3 -std=c++17 -lineinfo -arch=sm_XY``; an ``-arch`` or
    ``-gencode`` of yours replaces aka's). ``functions`` are checked to be exported now, so a
    missing ``extern "C"`` is a build error rather than a failure at the first call.
    """
    folder = native.caller_folder()
    paths = native.resolve_sources(sources, folder)
    nvcc = require_nvcc()
    arch = device_architecture()
    command = build_command(nvcc, paths, arch, flags)
    built = native.build("cuda", paths, [command], identity=native.tool_identity(nvcc), root=folder,
                         what=f"nvcc ({arch})")
    library = native.Library(built.path("lib.so"), sources=paths, root=folder, api="CUDA")
    return library.require(*functions)


class CudaBackend(native.NativeBackend):
    name = "cuda"

    def describe_device(self, device: str) -> DeviceInfo:
        info = super().describe_device(device)
        nvcc = find_nvcc()
        software = dict(info.software)
        if nvcc:
            software["nvcc"] = nvcc_version(nvcc)
        if native.compile_only():
            software["mode"] = (f"compile-only for {native.target_architecture()} (no NVIDIA GPU "
                                "here: nothing runs)")
        return attrs.evolve(info, software=software)

    def readiness(self) -> BackendReadiness:
        nvcc = find_nvcc()
        if nvcc is None:
            return BackendReadiness(build=False, run=False, vendors=("nvidia",), detail=(
                "nvcc not found: install the CUDA toolkit (or pip install nvidia-cuda-nvcc) and "
                "put it on PATH, or set CUDA_HOME"))
        found = f"nvcc {nvcc_version(nvcc)} ({nvcc})"
        import torch

        if torch.cuda.is_available() and torch.version.cuda:
            major, minor = torch.cuda.get_device_capability()
            return BackendReadiness(build=True, run=True, vendors=("nvidia",), detail=(
                f"{found}; builds for sm_{major}{minor} and runs on "
                f"{torch.cuda.get_device_name(0)}"))
        return BackendReadiness(build=True, run=False, vendors=("nvidia",), detail=(
            f"{found}; no NVIDIA GPU: compile-only (default {DEFAULT_ARCHITECTURE})"))


@hookimpl
def aka_register_backends() -> list[BackendSpec]:
    return [BackendSpec(
        name="cuda", factory=CudaBackend, compile_only_architecture=DEFAULT_ARCHITECTURE,
        vendors=("nvidia",),
        description="CUDA C++ built with nvcc into a library called through ctypes; "
                    "compile-only without an NVIDIA GPU",
    )]
