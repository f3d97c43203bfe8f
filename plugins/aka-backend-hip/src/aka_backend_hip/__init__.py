"""The ``hip`` backend: HIP C++ candidates built with hipcc, called from Python through ctypes.

A candidate is a Python entry point (``kernel.py:fn``, the operator-task contract) that builds its
``.hip`` sources when imported and calls their ``extern "C"`` launchers::

    from aka_backend_hip import load

    lib = load("kernel.hip", functions=["gelu_launch"])

    def gelu(x):
        out = torch.empty_like(x)
        lib.gelu_launch(x, out, x.numel())   # extern "C" int gelu_launch(const void*, void*,
        return out                            #     int64_t, hipStream_t)

On a host with an AMD GPU (a ROCm build of PyTorch), ``load`` builds with hipcc for the GPU's
architecture (``gfx942`` on an MI300X) into a shared library cached by content
(``aka_core.kits.native``), so an unchanged candidate is never rebuilt; compile errors name the
``.hip`` file and line. Without one, a compile-only evaluation builds with clang for the task's
architecture (device code to assembly, host code to an object) and checks that the launchers are
defined; nothing is linked or run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import attrs

from aka_backend_hip.toolchain import (
    DEFAULT_ARCHITECTURE,
    amd_gpu_visible,
    clang_version,
    compile_only_build,
    device_architecture,
    find_clang,
    find_hipcc,
    gpu_build_command,
    hip_include_dir,
    hipcc_version,
    require_functions,
    require_hipcc,
    supports_architecture,
)
from aka_core.plugin import BackendReadiness, BackendSpec, DeviceInfo, hookimpl, native

__all__ = ["HipBackend", "load"]


def load(*sources: str | os.PathLike[str], flags: Sequence[str] = (),
         functions: Sequence[str] = ()) -> native.Library | native.CompiledOnly:
    """Build ``sources`` (relative to the calling module's folder) and load the library.

    ``flags`` go to the compiler after aka's (``-O3 -std=c++17 --offload-arch=gfxNNN``; an
    ``--offload-arch`` of yours replaces aka's on a GPU host, while a compile-only build always
    targets the evaluator's architecture). ``functions`` are checked to be defined now, so a
    missing ``extern "C"`` is a build error rather than a failure at the first call.
    """
    folder = native.caller_folder()
    paths = native.resolve_sources(sources, folder)
    if native.compile_only():
        arch = device_architecture()
        built, clang = compile_only_build(paths, arch, flags, folder)
        require_functions(built.folder, functions, paths, folder, clang)
        return native.CompiledOnly(arch, built.folder, what=(
            f"compile-only with clang {clang_version(clang)}: device code to {arch} assembly, "
            "host code to an object, nothing linked"))
    hipcc = require_hipcc()
    arch = device_architecture()
    command = gpu_build_command(hipcc, paths, arch, flags)
    built = native.build("hip", paths, [command], identity=native.tool_identity(hipcc), root=folder,
                         what=f"hipcc ({arch})")
    library = native.Library(built.path("lib.so"), sources=paths, root=folder, api="HIP")
    return library.require(*functions)


class HipBackend(native.NativeBackend):
    name = "hip"

    def describe_device(self, device: str) -> DeviceInfo:
        info = super().describe_device(device)
        software = dict(info.software)
        if native.compile_only():
            clang = find_clang()
            if clang:
                software["hip_compiler"] = f"clang {clang_version(clang)}"
            software["mode"] = (f"compile-only for {native.target_architecture()} (no AMD GPU "
                                "here: nothing runs)")
        else:
            hipcc = find_hipcc()
            if hipcc:
                software["hip_compiler"] = f"hipcc {hipcc_version(hipcc)}"
        return attrs.evolve(info, software=software)

    def readiness(self) -> BackendReadiness:
        if amd_gpu_visible():
            return self._gpu_readiness()
        clang = find_clang()
        if clang is None:
            return BackendReadiness(build=False, run=False, vendors=("amd",), detail=(
                "no AMD GPU and no HIP-capable clang (clang++ 17 or newer): install clang-19 and "
                "libamdhip64-dev (or ROCm) for compile-only builds, or set AKA_HIP_CLANG"))
        found = f"clang {clang_version(clang)} ({clang})"
        include = hip_include_dir()
        if include is None:
            return BackendReadiness(build=False, run=False, vendors=("amd",), detail=(
                f"{found}, but no HIP headers (hip/hip_runtime.h): install libamdhip64-dev or "
                "ROCm, or set ROCM_PATH"))
        if not supports_architecture(clang, DEFAULT_ARCHITECTURE):
            return BackendReadiness(build=False, run=False, vendors=("amd",), detail=(
                f"{found} cannot build for {DEFAULT_ARCHITECTURE}: use clang 17 or newer"))
        return BackendReadiness(build=True, run=False, vendors=("amd",), detail=(
            f"{found} with HIP headers in {include}; no AMD GPU: compile-only (default "
            f"{DEFAULT_ARCHITECTURE})"))

    @staticmethod
    def _gpu_readiness() -> BackendReadiness:
        import torch

        name = torch.cuda.get_device_name(0)
        hipcc = find_hipcc()
        if hipcc is None:
            return BackendReadiness(build=False, run=False, vendors=("amd",), detail=(
                f"AMD GPU {name} visible but hipcc not found: install ROCm and set ROCM_PATH "
                "(or AKA_HIPCC)"))
        return BackendReadiness(build=True, run=True, vendors=("amd",), detail=(
            f"hipcc {hipcc_version(hipcc)} ({hipcc}); builds for {device_architecture()} and "
            f"runs on {name}"))


@hookimpl
def aka_register_backends() -> list[BackendSpec]:
    return [BackendSpec(
        name="hip", factory=HipBackend, compile_only_architecture=DEFAULT_ARCHITECTURE,
        vendors=("amd",),
        description="HIP C++ built with hipcc into a library called through ctypes; "
                    "compile-only with clang without an AMD GPU",
    )]
