"""The ``flydsl`` backend: FlyDSL candidates (AMD's Python kernel DSL) on AMD GPUs.

A candidate is a Python entry point (``kernel.py:fn``, the operator-task contract) whose
kernels are ``@flyc.kernel`` functions launched from ``@flyc.jit`` host functions. FlyDSL
compiles a kernel at its first launch, so ``prepare`` launches once: a compile error (MLIR
verification, a lowering pass, a Python error while tracing the kernel body) becomes a
``BuildError`` at the candidate's file and line.

Without an AMD GPU the evaluation is compile-only (the task's architecture, default gfx942):
FlyDSL's own ``COMPILE_ONLY`` mode traces and compiles every launch, then returns without
running it (CPU tensors stand in for device buffers). ``prepare`` then requires that the
candidate really built at least one FlyDSL kernel, checks each code object is an AMDGPU ELF for
the target, and writes it under ``$AKA_BUILD_CACHE/flydsl/objects/<arch>/``. A Triton baseline
(``triton2flydsl``) is compiled for the same target by Triton's AMD backend; a PyTorch
baseline (``torch2flydsl``) has nothing to build. What was built is printed to the worker's
log. See ``toolkit`` for the ``ld.lld`` and device bitcode FlyDSL links with.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs

from aka_backend_flydsl.builds import (
    CodeObject,
    FlydslWatch,
    Watch,
    check_code_object,
    code_objects,
    internals_missing,
    save,
    watch_flydsl,
)
from aka_backend_flydsl.errors import compile_failure
from aka_backend_flydsl.toolkit import (
    DEFAULT_ARCHITECTURE,
    configure,
    find_device_bitcode,
    find_lld,
    flydsl_version,
    installed_rocm_root,
    lld_version,
    target_architecture,
)
from aka_core.plugin import (
    BackendReadiness,
    BackendSpec,
    BuildError,
    DeviceInfo,
    PythonBackend,
    hookimpl,
    native,
)

__all__ = ["DEFAULT_ARCHITECTURE", "FlydslBackend", "configure"]

INSTALL = "pip install flydsl==0.5.0"
SIDE_PREFIX = "aka_side_"
FRAMEWORKS = ("flydsl", "triton")


class FlydslBackend(PythonBackend):
    name = "flydsl"

    def __init__(self) -> None:
        self._sides: dict[int, tuple[Path, str]] = {}
        self._built_at_import: dict[str, FlydslWatch] = {}

    def worker_environment(self, device: str) -> dict[str, str]:
        # FlyDSL's variables depend on the compile-only target, known in the worker only:
        # configure() sets them there from AKA_COMPILE_ONLY / AKA_TARGET_ARCH.
        return {}

    def describe_device(self, device: str) -> DeviceInfo:
        configure()
        info = super().describe_device(device)
        software = dict(info.software)
        software["flydsl"] = flydsl_version() or "not installed"
        if native.compile_only():
            lld = find_lld()
            software["ld.lld"] = f"{lld_version(lld)} ({lld})" if lld else "not found"
            software["mode"] = (f"compile-only for {target_architecture()} (no AMD GPU here: kernels are "
                                "built, nothing runs)")
        return attrs.evolve(info, software=software)

    def readiness(self) -> BackendReadiness:
        version = flydsl_version()
        if version is None:
            return BackendReadiness(build=False, run=False, vendors=("amd",), detail=(
                f"FlyDSL is not installed: {INSTALL} (a manylinux wheel with no dependencies)"))
        missing = internals_missing()
        if missing:
            return BackendReadiness(build=False, run=False, vendors=("amd",), detail=(
                f"FlyDSL {version} is not usable here: {missing} (aka expects the 0.5 series: {INSTALL})"))
        lld = find_lld()
        bitcode = installed_rocm_root() or find_device_bitcode()
        if lld is None or bitcode is None:
            what = "ld.lld" if lld is None else "AMD device bitcode (ocml.bc, ockl.bc)"
            return BackendReadiness(build=False, run=False, vendors=("amd",), detail=(
                f"FlyDSL {version}, but no {what}: install ROCm, or on a CPU machine "
                "apt-get install lld-19 (and triton, whose AMD backend ships the device bitcode)"))
        import torch

        found = f"FlyDSL {version}, ld.lld {lld_version(lld)} ({lld})"
        if torch.cuda.is_available() and getattr(torch.version, "hip", None):
            arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
            return BackendReadiness(build=True, run=True, vendors=("amd",), detail=(
                f"{found}; builds for {arch} and runs on {torch.cuda.get_device_name(0)}"))
        return BackendReadiness(build=True, run=False, vendors=("amd",), detail=(
            f"{found}; no AMD GPU: compile-only (default {DEFAULT_ARCHITECTURE})"))

    def load_callable(self, root: Path, ref: str, package: str) -> Callable[..., Any]:
        configure()  # before the module is imported: it may compile at import
        watching = native.compile_only() and flydsl_version() is not None
        with watch_flydsl() if watching else nullcontext(FlydslWatch()) as watch:
            fn = super().load_callable(root, ref, package)
        self._sides[id(fn)] = (root.resolve(), package)
        previous = self._built_at_import.setdefault(package, watch)
        if previous is not watch:
            previous.compiled.update(watch.compiled)
        return fn

    def prepare(self, fn: Callable[..., Any], inputs: Mapping[str, Any]) -> dict[str, Any] | None:
        """Launch once so that FlyDSL compiles now (compile-only: build for the target, never run).

        In compile-only mode, returns what was built (the evaluation record keeps it per side).
        """
        configure()
        root, package = self._sides.get(id(fn), (None, getattr(fn, "__module__", "") or ""))
        side = side_of(package)
        uses = frameworks_used(package)
        if native.compile_only():
            return self._build_only(fn, inputs, root, side, uses)
        self._launch(fn, inputs, root, side, uses)
        return None

    # ------------------------------------------------------------------ compile-only
    def _build_only(self, fn: Callable[..., Any], inputs: Mapping[str, Any], root: Path | None,
                    side: str, uses: set[str]) -> dict[str, Any]:
        arch = target_architecture()
        if side == "baseline" and not uses:
            note = f"PyTorch code (no FlyDSL or Triton kernel): nothing to build for {arch}"
            _log(f"{side}: {note}")
            return {"architecture": arch, "built": [], "note": note}
        if "flydsl" not in uses and side != "baseline":
            raise BuildError(f"the {side} uses no FlyDSL (it imports neither flydsl nor a module that "
                             f"does): a compile-only build for {arch} needs its kernels in FlyDSL",
                             file=_entry_file(fn, root))
        flydsl_watch, triton_watch = _build_call(fn, inputs, root, uses, arch)
        at_import = self._built_at_import.get(self._sides.get(id(fn), (None, ""))[1])
        if at_import is not None:  # kernels the side compiled when its module was imported
            flydsl_watch.compiled = {**at_import.compiled, **flydsl_watch.compiled}
        objects = _collect(flydsl_watch, triton_watch, arch)
        if side != "baseline" and not any(o.framework == "flydsl" for o in objects):
            raise BuildError(f"the {side} launched no FlyDSL kernel for the first case: a compile-only "
                             f"build for {arch} must compile at least one (nothing was built)",
                             file=_entry_file(fn, root))
        if side == "baseline" and not objects:
            raise BuildError("the baseline launched no FlyDSL or Triton kernel: nothing was built for "
                             f"{arch}")
        for obj in objects:
            _log(f"{side}: built {obj.describe()}")
        return {"architecture": arch, "built": [obj.describe() for obj in objects]}

    # ------------------------------------------------------------------ on an AMD GPU
    def _launch(self, fn: Callable[..., Any], inputs: Mapping[str, Any], root: Path | None, side: str,
                uses: set[str]) -> None:
        import torch

        flydsl = watch_flydsl() if "flydsl" in uses else nullcontext(FlydslWatch())
        with flydsl as watch:
            _call(fn, inputs, root, watch, Watch(), synchronize=torch.cuda.is_available())
        for function, artifact in watch.compiled.values():
            for blob, obj in code_objects(function, artifact):
                saved = attrs.evolve(obj, path=save(blob, obj.architecture, function))
                _log(f"{side}: built {saved.describe()}")


def _build_call(fn: Callable[..., Any], inputs: Mapping[str, Any], root: Path | None, uses: set[str],
                arch: str) -> tuple[FlydslWatch, Watch]:
    """Call once with FlyDSL (and Triton) launches compiling for ``arch`` without running."""
    from aka_backend_flydsl.triton_builds import TritonWatch, triton_compile_only

    flydsl = watch_flydsl() if "flydsl" in uses else nullcontext(FlydslWatch())
    triton = triton_compile_only(arch) if "triton" in uses else nullcontext(TritonWatch())
    with flydsl as flydsl_watch, triton as triton_watch:
        _call(fn, inputs, root, flydsl_watch, triton_watch)
    return flydsl_watch, triton_watch


def _call(fn: Callable[..., Any], inputs: Mapping[str, Any], root: Path | None, flydsl: Watch,
          triton: Watch, synchronize: bool = False) -> None:
    """Call once; a failure while a kernel compiled is a ``BuildError`` at the candidate's line."""
    try:
        fn(**inputs)
        if synchronize:
            import torch

            torch.cuda.synchronize()
    except BuildError:
        raise
    except Exception as exc:
        if type(exc).__name__ == "DSLCompileError" or flydsl.failed_while_compiling(exc):
            raise compile_failure(exc, root, "FlyDSL") from exc
        if (triton.failed_while_compiling(exc) or type(exc).__module__.startswith("triton.compiler")
                or type(exc).__name__ == "TritonNeedsGpu"):
            raise compile_failure(exc, root, "Triton") from exc
        raise


def _collect(flydsl: FlydslWatch, triton: Watch, arch: str) -> list[CodeObject]:
    """Every code object the watches saw, checked to be for ``arch`` and written to the cache."""
    from aka_backend_flydsl.triton_builds import code_object

    found = [pair for function, artifact in flydsl.compiled.values()
             for pair in code_objects(function, artifact)]
    found += [code_object(kernel) for kernel in getattr(triton, "kernels", [])]
    saved = []
    for blob, obj in found:
        problem = check_code_object(blob, arch)
        if problem:
            raise BuildError(f"{obj.framework} kernel {obj.function} did not build for {arch}: {problem}")
        saved.append(attrs.evolve(obj, path=save(blob, arch, obj.function)))
    return saved


def side_of(package: str) -> str:
    """``baseline`` or ``candidate`` from the worker's package name (``aka_side_baseline``)."""
    rest = package.removeprefix(SIDE_PREFIX) if package.startswith(SIDE_PREFIX) else ""
    return "baseline" if rest == "baseline" or rest.startswith("baseline_") else "candidate"


def frameworks_used(package: str) -> set[str]:
    """Which of FlyDSL and Triton the modules of ``package`` (a loaded side) import or define."""
    found: set[str] = set()
    if not package:
        return found
    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        for value in list(vars(module).values()):
            try:
                origins = ((value.__name__,) if isinstance(value, types.ModuleType) else
                           (type(value).__module__, getattr(value, "__module__", None)))
            except Exception:  # an object whose attribute lookup raises: not a kernel
                continue
            for origin in origins:
                top = origin.split(".")[0] if isinstance(origin, str) else ""
                if top in FRAMEWORKS:
                    found.add(top)
    return found


def _entry_file(fn: Callable[..., Any], root: Path | None) -> str | None:
    try:
        path = Path(inspect.getsourcefile(fn) or "").resolve()
    except TypeError:
        return None
    if root is not None and path.is_relative_to(root):
        return str(path.relative_to(root))
    return path.name or None


def _log(message: str) -> None:
    print(f"aka flydsl: {message}", file=sys.stderr, flush=True)


@hookimpl
def aka_register_backends() -> list[BackendSpec]:
    return [BackendSpec(
        name="flydsl", factory=FlydslBackend, compile_only_architecture=DEFAULT_ARCHITECTURE,
        vendors=("amd",),
        description="FlyDSL (AMD's Python kernel DSL) on AMD GPUs; compile-only without one",
    )]
