"""Build HIP kernel sources for the CPU emulator in ``hip_runtime.h`` and call their launchers.

::

    lib = emulate.build([Path("kernel.hip")])   # g++ -std=c++20, cached by content in a tmp dir
    lib.softmax_bf16(x, y, M, N)                 # CPU tensors, ints, floats; the stream is appended

The sources are rewritten before they are compiled: ``#include <hip/hip_runtime.h>`` includes the
emulation header, ``kernel<<<grid, block, shmem, stream>>>(args)`` becomes ``emu_launch(kernel,
emu_cfg(grid, block, shmem, stream), args)`` and clang's ``ext_vector_type(N)`` typedefs become
GCC's ``vector_size`` (same layout and subscripting). A ``#line`` directive keeps compiler
messages on the original file name and line.

Calls convert their arguments as ``aka_core.kits.native`` does for a GPU build (tensors as pointers,
ints as int64_t, floats as float, bools as bool, ctypes values as they are), except that tensors
must be in host memory: the emulated kernels read and write them directly. A launch error (an
invalid configuration, a shuffle from a lane that has returned) raises RuntimeError.

:func:`load` has ``aka_backend_hip.load``'s signature, so a test can put it in place of the real
one and import a task's ``kernel.py`` unchanged.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aka_core.kits.native import convert_argument

HERE = Path(__file__).resolve().parent
HEADER = HERE / "hip_runtime.h"
CACHE = Path(tempfile.gettempdir()) / "aka-hip-emulation"
CXX_FLAGS = ("-std=c++20", "-O1", "-fPIC", "-shared", "-pthread", "-Wall", "-Wno-unknown-pragmas",
             "-Wno-attributes", "-Wno-unused-function")
PASSED_FLAGS = ("-D", "-U", "-I")
"""Of a kernel's own build flags, only these apply here (hipcc's others, --offload-arch and -O3
for instance, mean nothing to the emulator)."""
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inc", ".cuh")
"""Headers next to the sources: they can be included, so they are part of the cache key."""

_INCLUDE = re.compile(r'#\s*include\s*[<"]hip/hip_runtime\.h[>"]')
_LAUNCH = re.compile(
    r"(?P<kernel>[A-Za-z_][\w:]*(?:<[^<>;]*(?:<[^<>;]*>[^<>;]*)*>)?)\s*<<<(?P<config>.+?)>>>\s*\(",
    re.S)
_TYPEDEF_VECTOR = re.compile(
    r"typedef\s+(?P<type>[\w: ]+?)\s+(?P<name>\w+)\s+__attribute__\(\(ext_vector_type\((?P<n>\w+)\)\)\)")
_USING_VECTOR = re.compile(
    r"using\s+(?P<name>\w+)\s*=\s*(?P<type>[\w: ]+?)\s+__attribute__\(\(ext_vector_type\((?P<n>\w+)\)\)\)")


class EmulationBuildError(RuntimeError):
    """The sources do not compile against the emulation header (the compiler's output follows)."""


def compiler() -> str | None:
    """The C++ compiler: ``$AKA_HIP_EMU_CXX`` or ``g++`` (found on PATH), or None."""
    return shutil.which(os.environ.get("AKA_HIP_EMU_CXX", "g++"))


@functools.cache
def unavailable_reason() -> str | None:
    """Why the emulator cannot build here (no compiler, no C++20 ``<barrier>``), or None."""
    cxx = compiler()
    if cxx is None:
        return f"no C++ compiler {os.environ.get('AKA_HIP_EMU_CXX', 'g++')!r} on PATH"
    probe = "#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n"
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text(probe, encoding="utf-8")
        result = subprocess.run([cxx, "-std=c++20", "-pthread", str(source), "-o", str(Path(tmp) / "p")],
                                capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["no output"]
        first = next((line for line in lines if "error" in line), lines[0])
        return f"{cxx} cannot build C++20 std::barrier (GCC 11 or newer is needed): {first}"
    return None


def rewrite(text: str, name: str) -> str:
    """The source as the emulator compiles it (same line numbers, reported as ``name``)."""
    text = _INCLUDE.sub('#include "hip_runtime.h"', text)
    text = _TYPEDEF_VECTOR.sub(
        lambda m: f"typedef {m['type']} {m['name']} "
                  f"__attribute__((vector_size({m['n']} * sizeof({m['type']}))))", text)
    text = _USING_VECTOR.sub(
        lambda m: f"using {m['name']} = {m['type']} "
                  f"__attribute__((vector_size({m['n']} * sizeof({m['type']}))))", text)

    def launch(m: re.Match[str]) -> str:
        rest = text[m.end():]
        no_args = rest.lstrip().startswith(")")
        return f"emu_launch({m['kernel']}, emu_cfg({m['config']}){'' if no_args else ', '}"

    text = _LAUNCH.sub(launch, text)
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'#line 1 "{escaped}"\n{text}'


@functools.cache
def _compiler_identity(cxx: str) -> str:
    result = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return f"{cxx}\n{result.stdout}"


def build(sources: Sequence[Path], flags: Sequence[str] = ()) -> EmulatedLibrary:
    """Compile ``sources`` into one shared library (cached by content) and load it."""
    cxx = compiler()
    reason = unavailable_reason()
    if cxx is None or reason is not None:
        raise EmulationBuildError(reason or "no C++ compiler")
    sources = [Path(s).resolve() for s in sources]
    folders = sorted({s.parent for s in sources})
    kept = [f for f in flags if f.startswith(PASSED_FLAGS)]
    # `#include "x.h"` looks next to the source, although the rewritten copy is compiled elsewhere.
    includes = [f"-iquote{folder}" for folder in folders]
    local_headers = [p.read_text(encoding="utf-8", errors="replace") for folder in folders
                     for p in sorted(folder.iterdir()) if p.suffix in HEADER_SUFFIXES and p.is_file()]
    # Compiler messages name a source by its file name, so that the cache key (and the build) of
    # a copy of a source is the same wherever the copy lies.
    texts = [rewrite(s.read_text(encoding="utf-8"), s.name) for s in sources]
    digest = hashlib.sha256()
    for part in (_compiler_identity(cxx), *CXX_FLAGS, *kept, HEADER.read_text(encoding="utf-8"), *texts,
                 *local_headers):
        digest.update(part.encode())
        digest.update(b"\0")
    folder = CACHE / digest.hexdigest()[:20]
    library = folder / "lib.so"
    if not library.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as work:  # private: builds may run at once
            units = []
            for i, (source, text) in enumerate(zip(sources, texts, strict=True)):
                unit = Path(work) / f"{i}_{source.stem}.cpp"
                unit.write_text(text, encoding="utf-8")
                units.append(str(unit))
            partial = Path(work) / "lib.so"
            command = [cxx, *CXX_FLAGS, *kept, *includes, f"-I{HERE}", *units, "-o", str(partial)]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise EmulationBuildError(
                    f"{', '.join(map(str, sources))} do not build for the CPU emulator:\n"
                    f"{result.stderr.strip()}")
            os.replace(partial, library)  # atomic: concurrent builds of the same sources agree
    return EmulatedLibrary(library)


def load(*sources: str | os.PathLike[str], flags: Sequence[str] = (),
         functions: Sequence[str] = ()) -> EmulatedLibrary:
    """``aka_backend_hip.load`` for the emulator: sources (and -I folders) are relative to the
    caller's folder."""
    folder = Path(sys._getframe(1).f_code.co_filename).resolve().parent
    paths = [Path(s) if Path(s).is_absolute() else folder / s for s in sources]
    flags = [f"-I{folder / f[2:]}" if f.startswith("-I") and not Path(f[2:]).is_absolute() else f
             for f in flags]
    return build(paths, flags).require(*functions)


class EmulatedLibrary:
    """``lib.name(*args)`` calls ``extern "C" int name(..., hipStream_t stream)`` on the CPU."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cdll = ctypes.CDLL(str(path))
        self._message = self._cdll.aka_hip_emu_last_message
        self._message.restype = ctypes.c_char_p
        self._functions: dict[str, EmulatedFunction] = {}

    def require(self, *names: str) -> EmulatedLibrary:
        for name in names:
            self.function(name)
        return self

    def function(self, name: str) -> EmulatedFunction:
        if name not in self._functions:
            try:
                symbol = getattr(self._cdll, name)
            except AttributeError:
                raise EmulationBuildError(f'{self.path} exports no function {name!r}: declare it '
                                          f'extern "C" int {name}(..., hipStream_t stream)') from None
            symbol.restype = ctypes.c_int
            self._functions[name] = EmulatedFunction(name, symbol, self._message)
        return self._functions[name]

    def __getattr__(self, name: str) -> EmulatedFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.function(name)


class EmulatedFunction:
    def __init__(self, name: str, symbol: Any, message: Any) -> None:
        self.name, self._symbol, self._message = name, symbol, message

    def __call__(self, *args: Any) -> None:
        converted = [convert_argument(self.name, i, arg, memory="cpu",
                                      need="the emulated kernels need host memory")
                     for i, arg in enumerate(args)]
        code = self._symbol(*converted, ctypes.c_void_p(0))
        message = (self._message() or b"").decode(errors="replace")  # also clears the error
        if code != 0 or message:
            raise RuntimeError(f"{self.name} returned HIP error {code}: {message or 'no message'}")
