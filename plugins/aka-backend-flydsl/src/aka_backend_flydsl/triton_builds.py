"""Compile-only Triton launches for an AMD GPU on a host without one.

A ``triton2flydsl`` task's baseline is a Triton kernel. On an AMD GPU it runs as usual; on a CPU
host Triton would fail at the launch (it finds no active driver). Triton's AMD backend itself
compiles in-process (its own LLVM, lld and device bitcode), so ``triton_compile_only(arch)``
makes every ``kernel[grid](...)`` launch made while it is active compile for ``arch`` and return
without launching: a stand-in driver reports the target (``hip``, ``arch``), and launches run
as ``warmup`` (compile only). The compiled kernels, with their ``hsaco`` code objects, are
collected. Autotuned kernels need a GPU to choose a configuration and fail with a clear error.

These reach into Triton's runtime (``triton.runtime.driver``, ``JITFunction.run``) of the 3.x
series.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aka_backend_flydsl.builds import CodeObject, Watch


class TritonNeedsGpu(RuntimeError):
    """A Triton feature that needs a GPU (autotuning, benchmarking) was used in compile-only mode."""


class TritonWatch(Watch):
    """The Triton kernels compiled under ``triton_compile_only()`` (``CompiledKernel``s)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: list[Any] = []


@contextmanager
def triton_compile_only(arch: str) -> Iterator[TritonWatch]:
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    warp_size = 32 if arch.startswith(("gfx10", "gfx11", "gfx12")) else 64
    watch = TritonWatch()
    touched: list[Any] = []

    class CompileOnlyDriver:
        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_current_target(self) -> Any:
            return GPUTarget("hip", arch, warp_size)

        def get_benchmarker(self) -> Any:
            raise TritonNeedsGpu("Triton autotuning and benchmarking need a GPU; a compile-only build "
                                 f"for {arch} cannot choose a configuration")

        def __getattr__(self, name: str) -> Any:
            raise AttributeError(f"Triton's driver.{name} needs a GPU (compile-only build for {arch})")

    original_run = JITFunction.run

    def compile_only_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        touched.append(self)
        try:
            kernel = original_run(self, *args, grid=grid, warmup=True, **kwargs)
        except BaseException as exc:
            watch.compile_error = watch.compile_error or exc
            raise
        if kernel is not None:
            watch.kernels.append(kernel)
        return kernel

    previous = driver._active
    driver.set_active(CompileOnlyDriver())
    JITFunction.run = compile_only_run
    try:
        yield watch
    finally:
        JITFunction.run = original_run
        driver._active = previous
        for fn in touched:  # their per-device caches hold the compile-only target
            fn.device_caches.clear()


def code_object(kernel: Any) -> tuple[bytes, CodeObject]:
    """A compiled Triton kernel's ``hsaco`` and what it is."""
    blob = bytes(kernel.asm.get("hsaco", b""))
    metadata = kernel.metadata
    target = getattr(metadata, "target", None)
    shared = getattr(metadata, "shared", None)
    return blob, CodeObject(
        framework="triton", function=kernel.name, kernels=(kernel.name,), size=len(blob),
        architecture=str(getattr(target, "arch", "unknown")),
        resources={"group_segment_fixed_size": int(shared)} if shared is not None else {})
