"""HIP compilers: hipcc on a host with an AMD GPU, a HIP-capable clang for compile-only builds.

On an AMD GPU host (ROCm PyTorch), hipcc builds every source into one shared library for the
visible GPU's architecture. Without one, a compile-only build runs clang twice per source: the
device side to ``gfx942`` (or the requested architecture) assembly, which runs the whole AMDGPU
back end (register allocation, LDS limits) without needing ROCm's device libraries, and the host
side to an object whose symbols show which ``extern "C"`` launchers exist. Nothing is linked.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from aka_core.plugin import BuildError, native

DEFAULT_ARCHITECTURE = "gfx942"
BASE_FLAGS = ("-O3", "-std=c++17")
CLANG_MIN_MAJOR = 17
"""The oldest upstream clang with gfx942 (MI300) support."""
_VERSIONED_CLANGS = ("clang++-21", "clang++-20", "clang++-19", "clang++-18")
_ARCH_FLAGS = ("--offload-arch", "--amdgpu-target", "--cuda-gpu-arch")


def _rocm_roots() -> list[Path]:
    roots = [Path(os.environ["ROCM_PATH"])] if os.environ.get("ROCM_PATH") else []
    return [*roots, Path("/opt/rocm")]


# --------------------------------------------------------------------------- hipcc (GPU host)


def find_hipcc() -> str | None:
    """``$AKA_HIPCC``, ``$ROCM_PATH/bin/hipcc``, ``/opt/rocm/bin/hipcc``, then ``hipcc`` on PATH."""
    return native.first_executable(os.environ.get("AKA_HIPCC"),
                                   *(str(r / "bin" / "hipcc") for r in _rocm_roots()),
                                   shutil.which("hipcc"))


def require_hipcc() -> str:
    hipcc = find_hipcc()
    if hipcc is None:
        raise BuildError("hipcc not found: install ROCm and set ROCM_PATH (or AKA_HIPCC), or put "
                         "hipcc on PATH")
    return hipcc


def hipcc_version(hipcc: str) -> str:
    match = re.search(r"HIP version:\s*(\S+)", native.tool_identity(hipcc))
    return match.group(1) if match else "unknown"


def amd_gpu_visible() -> bool:
    """Whether PyTorch is a ROCm build and sees a GPU."""
    try:
        import torch
    except ImportError:
        return False
    return getattr(torch.version, "hip", None) is not None and torch.cuda.is_available()


def device_architecture() -> str:
    """``gfxNNN`` of the visible GPU; in a compile-only evaluation, the target the evaluator gave."""
    if native.compile_only():
        return native.target_architecture() or DEFAULT_ARCHITECTURE
    if not amd_gpu_visible():
        raise BuildError("no AMD GPU visible to PyTorch (a ROCm build is needed): HIP candidates "
                         "build for the GPU they run on (a compile-only evaluation builds for the "
                         "task's architecture)")
    import torch

    name = getattr(torch.cuda.get_device_properties(0), "gcnArchName", "") or ""
    arch = name.split(":")[0]
    if not arch:
        raise BuildError("PyTorch does not report the GPU's architecture (gcnArchName)")
    return arch


def gpu_build_command(hipcc: str, sources: Sequence[Path], arch: str,
                      flags: Sequence[str]) -> list[str]:
    """One hipcc call: every source into ``{out}/lib.so`` for ``arch`` (unless flags name one)."""
    command = [hipcc, *BASE_FLAGS, "-fPIC", "-shared", "-o", "{out}/lib.so"]
    if not native.option_given(flags, _ARCH_FLAGS):
        command.append(f"--offload-arch={arch}")
    return [*command, *flags, *(str(s) for s in sources)]


# --------------------------------------------------------------------------- clang (compile-only)


def find_clang() -> str | None:
    """A clang that compiles HIP: ``$AKA_HIP_CLANG``, ROCm's ``llvm/bin/clang++``, the newest of
    ``clang++-21`` .. ``clang++-18`` on PATH, else ``clang++`` when it is clang 17 or newer."""
    found = native.first_executable(os.environ.get("AKA_HIP_CLANG"),
                                    *(str(r / "llvm" / "bin" / "clang++") for r in _rocm_roots()),
                                    *(shutil.which(name) for name in _VERSIONED_CLANGS))
    if found:
        return found
    plain = native.first_executable(shutil.which("clang++"))
    if plain and clang_major(plain) >= CLANG_MIN_MAJOR:
        return plain
    return None


def clang_version(clang: str) -> str:
    match = re.search(r"clang version (\S+)", native.tool_identity(clang))
    return match.group(1) if match else "unknown"


def clang_major(clang: str) -> int:
    match = re.match(r"(\d+)", clang_version(clang))
    return int(match.group(1)) if match else 0


@functools.cache
def supports_architecture(clang: str, arch: str) -> bool:
    """Whether ``clang`` knows ``arch`` (gfx950 needs clang 20; clang 19 rejects it)."""
    probe = [clang, "-x", "hip", f"--offload-arch={arch}", "--offload-device-only", "-nogpulib",
             "-nogpuinc", "-fsyntax-only", os.devnull]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def hip_include_dir() -> Path | None:
    """The folder holding ``hip/hip_runtime.h``: ``$ROCM_PATH/include``, ``/opt/rocm/include``,
    then ``/usr/include`` (Debian's libamdhip64-dev)."""
    for root in [*_rocm_roots(), Path("/usr")]:
        if (root / "include" / "hip" / "hip_runtime.h").is_file():
            return root / "include"
    return None


def require_compile_only_toolchain(arch: str) -> tuple[str, Path]:
    """The clang and HIP include folder for a compile-only build for ``arch``."""
    clang = find_clang()
    if clang is None:
        raise BuildError(f"no HIP-capable clang found (clang++ {CLANG_MIN_MAJOR} or newer): install "
                         "clang-19 (or ROCm), or set AKA_HIP_CLANG")
    if not supports_architecture(clang, arch):
        raise BuildError(f"{clang} (clang {clang_version(clang)}) cannot build for {arch}: use a "
                         "newer clang (gfx950 needs clang 20) via AKA_HIP_CLANG or ROCm")
    include = hip_include_dir()
    if include is None:
        raise BuildError("HIP headers (hip/hip_runtime.h) not found: install libamdhip64-dev or "
                         "ROCm, or set ROCM_PATH")
    return clang, include


def output_names(sources: Sequence[Path], arch: str) -> list[tuple[str, str]]:
    """(device assembly, host object) names per source: ``device-gfx942.s`` and ``host.o`` for
    one source, numbered when there are several."""
    if len(sources) == 1:
        return [(f"device-{arch}.s", "host.o")]
    return [(f"device-{arch}-{i}-{s.stem}.s", f"host-{i}-{s.stem}.o") for i, s in enumerate(sources)]


def compile_only_commands(clang: str, sources: Sequence[Path], arch: str, flags: Sequence[str],
                          include: Path) -> list[list[str]]:
    """Per source: device code to ``arch`` assembly (``-S``; the device libraries ``-c`` would
    link are not needed) and host code to a position-independent object."""
    user = [f for f in flags if not native.option_given([f], _ARCH_FLAGS)]  # the target wins
    includes = [] if include == Path("/usr/include") else ["-isystem", str(include)]
    common = [clang, "-x", "hip", f"--offload-arch={arch}", "-nogpulib", *BASE_FLAGS, *includes,
              *user]
    commands = []
    for source, (device, host) in zip(sources, output_names(sources, arch), strict=True):
        commands.append([*common, "--offload-device-only", "-S", str(source), "-o",
                         f"{{out}}/{device}"])
        commands.append([*common, "--offload-host-only", "-fPIC", "-c", str(source), "-o",
                         f"{{out}}/{host}"])
    return commands


def compile_only_build(sources: Sequence[Path], arch: str, flags: Sequence[str],
                       root: Path) -> tuple[native.Build, str]:
    """Build ``sources`` for ``arch`` without linking (cached by content); the build and clang."""
    clang, include = require_compile_only_toolchain(arch)
    commands = compile_only_commands(clang, sources, arch, flags, include)
    version_header = include / "hip" / "hip_version.h"
    headers = version_header.read_text(errors="replace") if version_header.is_file() else str(include)
    built = native.build("hip", sources, commands, identity=f"{native.tool_identity(clang)}\n{headers}",
                         root=root, what=f"clang {clang_version(clang)} (HIP for {arch}, compile-only)")
    return built, clang


# --------------------------------------------------------------------------- symbols


def find_nm(clang: str | None = None) -> str | None:
    """``llvm-nm`` beside ``clang`` (following links), else ``llvm-nm`` or ``nm`` on PATH."""
    if clang:
        sibling = native.first_executable(str(Path(os.path.realpath(clang)).parent / "llvm-nm"))
        if sibling:
            return sibling
    return shutil.which("llvm-nm") or shutil.which("nm")


def defined_functions(objects: Sequence[Path], nm: str) -> set[str]:
    """Global functions the objects define (``T``/``W`` symbols)."""
    names: set[str] = set()
    for obj in objects:
        done = subprocess.run([nm, "-g", "--defined-only", str(obj)], capture_output=True,
                              text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise BuildError(f"{nm} cannot read {obj.name}: {done.stderr.strip()}")
        for line in done.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in ("T", "W"):
                names.add(parts[2])
    return names


def _relative(path: Path, root: Path) -> str:
    resolved, base = path.resolve(), root.resolve()
    return str(resolved.relative_to(base)) if resolved.is_relative_to(base) else str(path)


def require_functions(folder: Path, functions: Sequence[str], sources: Sequence[Path], root: Path,
                      clang: str) -> None:
    """Raise ``BuildError`` naming the source when a requested launcher is not defined."""
    if not functions:
        return
    nm = find_nm(clang)
    if nm is None:
        raise BuildError("neither llvm-nm nor nm found: cannot check the launchers exist")
    defined = defined_functions(sorted(folder.glob("host*.o")), nm)
    shown = [_relative(s, root) for s in sources]
    for name in functions:
        if name not in defined:
            raise BuildError(
                f"{', '.join(shown)} defines no function {name!r}: declare it "
                f'extern "C" int {name}(..., hipStream_t stream)', file=shown[0])
