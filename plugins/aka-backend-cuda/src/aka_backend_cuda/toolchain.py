"""nvcc: where it is, which architecture to build for, and the command that builds a library."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from aka_core.plugin import BuildError, native

DEFAULT_ARCHITECTURE = "sm_90"
BASE_FLAGS = ("-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC")
_ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "--gpu-code")


def find_nvcc() -> str | None:
    """``$AKA_NVCC``, ``$CUDA_HOME/bin/nvcc``, ``nvcc`` on PATH, then ``/usr/local/cuda/bin``."""
    cuda_home = os.environ.get("CUDA_HOME")
    return native.first_executable(os.environ.get("AKA_NVCC"),
                                   cuda_home and str(Path(cuda_home) / "bin" / "nvcc"),
                                   shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc")


def require_nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("nvcc not found: install the CUDA toolkit (or pip install nvidia-cuda-nvcc)"
                         " and put nvcc on PATH, or set CUDA_HOME or AKA_NVCC")
    return nvcc


def nvcc_version(nvcc: str) -> str:
    match = re.search(r"release (\d+\.\d+)", native.tool_identity(nvcc))
    return match.group(1) if match else "unknown"


def device_architecture() -> str:
    """``sm_XY`` of the visible GPU; in a compile-only evaluation, the target the evaluator gave."""
    if native.compile_only():
        return native.target_architecture() or DEFAULT_ARCHITECTURE
    import torch

    if not torch.cuda.is_available():
        raise BuildError("no NVIDIA GPU visible to PyTorch: CUDA candidates build for the GPU they "
                         "run on (a compile-only evaluation builds for the task's architecture)")
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def build_command(nvcc: str, sources: Sequence[Path], arch: str,
                  flags: Sequence[str]) -> list[str]:
    """One nvcc call: every source into ``{out}/lib.so`` for ``arch`` (unless flags name one)."""
    command = [nvcc, *BASE_FLAGS, "-shared", "-o", "{out}/lib.so"]
    if not native.option_given(flags, _ARCH_FLAGS):
        command.append(f"-arch={arch}")
    return [*command, *flags, *(str(s) for s in sources)]
