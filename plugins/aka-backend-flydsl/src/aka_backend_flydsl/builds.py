"""What a call built: the FlyDSL (and Triton) kernels it compiled and their AMDGPU code objects.

``watch_flydsl()`` records every ``@flyc.jit`` launch made while it is active: the compiled
artifact (FlyDSL sets ``JitFunction._last_compiled`` once the kernel is compiled, before it
launches) or, when tracing or lowering raised, that the failure happened while compiling.
``code_objects()`` takes the AMDGPU code objects out of an artifact (the ``gpu.binary`` op of
its compiled MLIR), ``check_code_object()`` proves one is an ELF for the requested
architecture, and ``save()`` writes it under ``$AKA_BUILD_CACHE/flydsl/objects/<arch>/``.

These reach into FlyDSL internals (``JitFunction._compile_or_execute``, ``_last_compiled``,
``CompiledArtifact._ir_text``) of the 0.5 series; ``internals_missing()`` says when an
installed FlyDSL no longer has them.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from aka_core.plugin import native

EM_AMDGPU = 224
EF_AMDGPU_MACH = 0x0FF
# e_flags machine numbers (llvm/BinaryFormat/ELF.h); other targets are checked by name.
AMDGPU_MACH = {
    "gfx908": 0x030, "gfx90a": 0x03F, "gfx940": 0x040, "gfx941": 0x04B, "gfx942": 0x04C,
    "gfx950": 0x04F, "gfx1100": 0x041, "gfx1101": 0x046, "gfx1102": 0x047, "gfx1200": 0x048,
    "gfx1201": 0x04E,
}
_RESOURCE = re.compile(r"\b(vgpr_count|sgpr_count|agpr_count|vgpr_spill_count|sgpr_spill_count|"
                       r"group_segment_fixed_size|private_segment_fixed_size) = (\d+)")


@attrs.frozen(kw_only=True)
class CodeObject:
    """One compiled kernel module: what built it, for which GPU, and where it was written."""

    framework: str
    function: str
    kernels: tuple[str, ...]
    architecture: str
    size: int
    path: Path | None = None
    resources: Mapping[str, int] = attrs.field(factory=dict)

    def describe(self) -> str:
        names = ", ".join(self.kernels) or self.function
        use = self.resources
        regs = (f", {use['vgpr_count']} VGPR, {use['sgpr_count']} SGPR, "
                f"{use.get('group_segment_fixed_size', 0)} B LDS") if "vgpr_count" in use else ""
        where = f" -> {self.path}" if self.path else ""
        return f"{self.framework} {names} ({self.architecture}, {self.size} B code object{regs}){where}"


class Watch:
    """Launches made while a watch is active: the first error raised before a kernel compiled."""

    def __init__(self) -> None:
        self.compile_error: BaseException | None = None

    def failed_while_compiling(self, exc: BaseException) -> bool:
        """Whether ``exc`` is (or was caused by) an error raised before a kernel was compiled."""
        seen: BaseException | None = exc
        while seen is not None:
            if seen is self.compile_error:
                return True
            seen = seen.__cause__ or seen.__context__
        return False


class FlydslWatch(Watch):
    """What the FlyDSL launches made under ``watch_flydsl()`` compiled (by artifact key)."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled: dict[str, tuple[str, Any]] = {}


@contextmanager
def watch_flydsl() -> Iterator[FlydslWatch]:
    from flydsl.compiler.jit_function import JitFunction

    watch = FlydslWatch()
    original = JitFunction._compile_or_execute

    def recording(self: Any, args: Any, kwargs: Any, **options: Any) -> Any:
        before = self._last_compiled
        try:
            result = original(self, args, kwargs, **options)
        except BaseException as exc:
            if self._last_compiled is before and watch.compile_error is None:
                watch.compile_error = exc
            raise
        after = self._last_compiled
        if after is not None and after is not before:
            key, artifact = after
            watch.compiled.setdefault(key, (self.func.__name__, artifact))
        return result

    JitFunction._compile_or_execute = recording
    try:
        yield watch
    finally:
        JitFunction._compile_or_execute = original


def internals_missing() -> str | None:
    """What of FlyDSL's internals this module relies on is missing (None: all present)."""
    try:
        from flydsl.compiler import jit_executor, jit_function
    except Exception as exc:  # a broken install raises anything at import
        return f"flydsl does not import: {type(exc).__name__}: {exc}"
    for owner, name in ((jit_function.JitFunction, "_compile_or_execute"),
                        (jit_function, "_create_mlir_context"), (jit_executor, "CompiledArtifact")):
        if not hasattr(owner, name):
            return f"flydsl {getattr(owner, '__name__', owner)} has no {name}"
    return None


def code_objects(function: str, artifact: Any) -> list[tuple[bytes, CodeObject]]:
    """The code objects in a compiled FlyDSL artifact, one per ``gpu.binary`` object."""
    from flydsl._mlir import ir
    from flydsl._mlir.dialects import gpu
    from flydsl.compiler.jit_function import _create_mlir_context

    found = []
    with _create_mlir_context():
        module = ir.Module.parse(artifact._ir_text)
        for op in module.body.operations:
            if op.operation.name != "gpu.binary":
                continue
            for attr in op.attributes["objects"]:
                obj = gpu.ObjectAttr(attr)
                blob = bytes(obj.object)
                chip = re.search(r'chip = "([^"]+)"', str(obj.target))
                table = str(obj.kernels)
                found.append((blob, CodeObject(
                    framework="flydsl", function=function, size=len(blob),
                    kernels=tuple(re.findall(r'kernel_metadata<"([^"]+)"', table)),
                    architecture=chip.group(1) if chip else "unknown",
                    resources={k: int(v) for k, v in _RESOURCE.findall(table)})))
    return found


def check_code_object(blob: bytes, arch: str) -> str | None:
    """Why ``blob`` is not an AMDGPU code object for ``arch`` (None: it is)."""
    if blob[:4] != b"\x7fELF" or len(blob) < 52:
        return "it is not an ELF file (the target did not emit a binary)"
    machine = struct.unpack_from("<H", blob, 18)[0]
    if machine != EM_AMDGPU:
        return f"its ELF machine is {machine}, not AMDGPU ({EM_AMDGPU})"
    flags = struct.unpack_from("<I", blob, 48)[0]
    expected = AMDGPU_MACH.get(arch.split(":")[0])
    if expected is not None:
        if flags & EF_AMDGPU_MACH != expected:
            return f"it was built for AMDGPU machine {flags & EF_AMDGPU_MACH:#x}, not {arch} ({expected:#x})"
    elif f"-{arch}".encode() not in blob:
        return f"it does not name {arch} as its target"
    return None


def save(blob: bytes, arch: str, function: str) -> Path:
    """Write a code object under ``$AKA_BUILD_CACHE/flydsl/objects/<arch>/`` (by content)."""
    digest = hashlib.sha256(blob).hexdigest()[:16]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", function)[:80] or "kernel"
    folder = native.cache_root() / "flydsl" / "objects" / arch
    path = folder / f"{safe}-{digest}.hsaco"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(blob)
        os.replace(temporary, path)
    return path
