"""What FlyDSL needs around it to build AMD GPU code, and the environment that selects it.

FlyDSL lowers a kernel in-process (its own MLIR/LLVM) to an AMDGPU object, then links that
object into a code object with ``ld.lld`` and links ROCm's device bitcode (``ocml``, ``ockl``)
into kernels that call math functions. It looks for both under one ROCm root:
``$ROCM_PATH/llvm/bin/ld.lld`` and ``$ROCM_PATH/amdgcn/bitcode`` (``/opt/rocm`` when
``ROCM_PATH`` is unset). A ROCm installation has that layout. Without one (a CPU host building
for an AMD GPU it does not have), ``toolkit_root`` lays out a stand-in root under aka's build
cache: symlinks to a system ``ld.lld`` (Debian/Ubuntu ``lld-19``) and to device bitcode (a
ROCm-less ``rocm-device-libs`` package or the ``ocml.bc``/``ockl.bc`` that Triton's AMD backend
ships).

FlyDSL reads these environment variables when it compiles (``flydsl/utils/env.py``):

* ``COMPILE_ONLY=1``: a launch traces and compiles the kernel, then returns without running it;
* ``ARCH``: the target architecture of the compile (``gfx942``); ``FLYDSL_GPU_ARCH``: the
  architecture that FlyDSL's helpers (``get_rocm_arch()``: warp size, LDS size) assume;
* ``ROCM_PATH``: the root holding ``llvm/bin/ld.lld`` and ``amdgcn/bitcode``;
* ``FLYDSL_RUNTIME_CACHE_DIR``: FlyDSL's own cache of compiled kernels (default ``~/.flydsl``).

``configure()`` sets them in the evaluation worker from the evaluator's ``AKA_COMPILE_ONLY`` and
``AKA_TARGET_ARCH`` before a candidate module is imported.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from aka_core.plugin import native

DEFAULT_ARCHITECTURE = "gfx942"
LLD_RELATIVE = Path("llvm") / "bin" / "ld.lld"
BITCODE_RELATIVE = Path("amdgcn") / "bitcode"
REQUIRED_BITCODE = ("ocml.bc", "ockl.bc")
_NEWEST_LLD = 30
_OLDEST_LLD = 15  # the first lld that knows gfx940-gfx942


def shim_root() -> Path:
    """Where ``toolkit_root`` lays out a stand-in ROCm root when none is installed."""
    return native.cache_root() / "flydsl" / "rocm-toolkit"


def rocm_roots() -> list[Path]:
    """ROCm installations FlyDSL would use on its own: ``$ROCM_PATH``, then ``/opt/rocm``."""
    roots = [Path(r) for r in (os.environ.get("ROCM_PATH"), "/opt/rocm") if r]
    return [r for r in roots if r != shim_root()]


def installed_rocm_root() -> Path | None:
    """A ROCm root with both ``llvm/bin/ld.lld`` and ``amdgcn/bitcode``, or None."""
    for root in rocm_roots():
        if (root / LLD_RELATIVE).is_file() and _has_bitcode(root / BITCODE_RELATIVE):
            return root
    return None


def find_lld() -> Path | None:
    """An ``ld.lld`` that links AMDGPU code objects: ROCm's, else the newest system one."""
    for root in rocm_roots():
        if (root / LLD_RELATIVE).is_file():
            return root / LLD_RELATIVE
    for version in range(_NEWEST_LLD, _OLDEST_LLD - 1, -1):
        found = shutil.which(f"ld.lld-{version}")
        if found:
            return Path(found)
    for path in sorted(glob.glob("/usr/lib/llvm-*/bin/ld.lld"), key=_llvm_version, reverse=True):
        if _llvm_version(path) >= _OLDEST_LLD:
            return Path(path)
    found = shutil.which("ld.lld")
    return Path(found) if found else None


def find_device_bitcode() -> Path | None:
    """A folder holding ``ocml.bc`` and ``ockl.bc`` (ROCm's device libraries)."""
    candidates = [root / BITCODE_RELATIVE for root in rocm_roots()]
    triton = importlib.util.find_spec("triton")
    if triton is not None and triton.submodule_search_locations:
        candidates.append(Path(next(iter(triton.submodule_search_locations))) / "backends" / "amd" / "lib")
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/*/amdgcn/bitcode"))]
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/llvm-*/lib/clang/*/amdgcn/bitcode"),
                                            key=_llvm_version, reverse=True)]
    return next((c for c in candidates if _has_bitcode(c)), None)


def _has_bitcode(folder: Path) -> bool:
    return all((folder / name).is_file() for name in REQUIRED_BITCODE)


def _llvm_version(path: str) -> int:
    match = re.search(r"llvm-(\d+)", path)
    return int(match.group(1)) if match else 0


def lld_version(lld: Path) -> str:
    try:
        out = subprocess.run([str(lld), "--version"], capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except OSError:
        return "unknown"
    match = re.search(r"LLD (\S+)", out)
    return match.group(1) if match else (out.strip().splitlines() or ["unknown"])[0]


def toolkit_root() -> Path | None:
    """The root FlyDSL links against: an installed ROCm, else a stand-in laid out in the cache.

    None when no ``ld.lld`` or no device bitcode was found.
    """
    installed = installed_rocm_root()
    if installed is not None:
        return installed
    lld, bitcode = find_lld(), find_device_bitcode()
    if lld is None or bitcode is None:
        return None
    shim = shim_root()
    _place_link(shim / LLD_RELATIVE, lld.resolve())
    for name in REQUIRED_BITCODE:
        _place_link(shim / BITCODE_RELATIVE / name, (bitcode / name).resolve())
    return shim


def _place_link(link: Path, target: Path) -> None:
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    temporary = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(target)
    os.replace(temporary, link)  # atomic: a concurrent worker sees the old link or the new one


def flydsl_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flydsl")
    except PackageNotFoundError:
        return None


def target_architecture() -> str:
    """The architecture a compile-only evaluation builds for."""
    return native.target_architecture() or DEFAULT_ARCHITECTURE


def configure() -> None:
    """Point FlyDSL at the evaluator's target; call before FlyDSL compiles anything.

    In a compile-only evaluation: ``COMPILE_ONLY=1``, ``ARCH`` and ``FLYDSL_GPU_ARCH`` = the
    target, and ``ROCM_PATH`` = a stand-in root when no ROCm is installed. In every mode
    FlyDSL's kernel cache defaults to ``$AKA_BUILD_CACHE/flydsl/jit`` (kept if set).
    """
    os.environ.setdefault("FLYDSL_RUNTIME_CACHE_DIR", str(native.cache_root() / "flydsl" / "jit"))
    if not native.compile_only():
        return
    arch = target_architecture()
    os.environ["COMPILE_ONLY"] = "1"
    os.environ["ARCH"] = arch
    os.environ["FLYDSL_GPU_ARCH"] = arch
    if installed_rocm_root() is None:
        root = toolkit_root()
        if root is not None:
            os.environ["ROCM_PATH"] = str(root)
