"""The cuda backend on a host without an NVIDIA GPU: nvcc builds for sm_90 (compile-only), the
library loads and exports its launchers, errors name the .cu file and line, builds are cached."""

from __future__ import annotations

import ctypes
import uuid
from pathlib import Path

import pytest
from aka_backend_cuda import CudaBackend, aka_register_backends
from aka_backend_cuda.toolchain import build_command, find_nvcc

from aka_core.plugin import BuildError, PythonBackend, native
from aka_core.testing import BackendContract

SCALE = """\
#include <cstdint>
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* x, float* y, float a, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

extern "C" int scale_launch(const void* x, void* y, float a, int64_t n, cudaStream_t stream) {
  if (n <= 0) return 0;
  scale_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      static_cast<const float*>(x), static_cast<float*>(y), a, n);
  return static_cast<int>(cudaGetLastError());
}
"""

ENTRY = """\
import torch

from aka_backend_cuda import load

_lib = load("kernel.cu", functions={functions!r})


def scale(x: torch.Tensor, a: float) -> torch.Tensor:
    y = torch.empty_like(x)
    _lib.scale_launch(x, y, float(a), x.numel())
    return y
"""

BROKEN_LINE = 6
BROKEN = SCALE.replace("if (i < n) y[i] = a * x[i];", "if (i < n) y[i] = a * x[i] + undeclared;")


class TestCudaContract(BackendContract):
    @pytest.fixture
    def record(self):
        return aka_register_backends()[0]


def test_the_record_builds_compile_only_for_sm_90() -> None:
    record = aka_register_backends()[0]
    assert record.name == "cuda" and record.compile_only_architecture == "sm_90"


def test_arch_flag_is_aka_s_unless_the_candidate_gives_one() -> None:
    sources = [Path("/k/kernel.cu")]
    assert "-arch=sm_90" in build_command("nvcc", sources, "sm_90", [])
    own = build_command("nvcc", sources, "sm_90", ["-arch=sm_90a"])
    assert "-arch=sm_90a" in own and "-arch=sm_90" not in own
    gencode = build_command("nvcc", sources, "sm_90", ["-gencode", "arch=compute_90a,code=sm_90a"])
    assert not any(a.startswith("-arch=") for a in gencode)


def test_nvcc_and_clang_diagnostics_map_to_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text("x\n")
    nvcc = f'{tmp_path}/kernel.cu(12): error: identifier "foo" is undefined\n'
    clang = f"{tmp_path}/kernel.hip:7:3: error: use of undeclared identifier 'bar'\n"
    (first,) = native.parse_diagnostics(nvcc, tmp_path)
    assert (first.file, first.line, first.severity) == ("kernel.cu", 12, "error")
    (second,) = native.parse_diagnostics(clang, tmp_path)
    assert (second.file, second.line, second.column) == ("kernel.hip", 7, 3)
    error = native.build_failure(nvcc + "1 error detected\n", tmp_path, "nvcc (sm_90)")
    assert (error.file, error.line) == ("kernel.cu", 12)
    assert 'identifier "foo" is undefined' in error.message


def test_arguments_convert_to_c_types_and_cpu_tensors_are_refused() -> None:
    torch = pytest.importorskip("torch")
    assert isinstance(native.convert_argument("f", 0, 3), ctypes.c_int64)
    assert isinstance(native.convert_argument("f", 0, 0.5), ctypes.c_float)
    assert isinstance(native.convert_argument("f", 0, True), ctypes.c_bool)
    assert isinstance(native.convert_argument("f", 0, ctypes.c_int32(1)), ctypes.c_int32)
    with pytest.raises(TypeError, match="argument 2 is a tensor on cpu"):
        native.convert_argument("f", 2, torch.zeros(3))
    with pytest.raises(TypeError, match="argument 1 has type str"):
        native.convert_argument("f", 1, "no")


# --------------------------------------------------------------------------- with nvcc

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


@pytest.fixture
def compile_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(native.COMPILE_ONLY_ENV, "1")
    monkeypatch.setenv(native.TARGET_ARCH_ENV, "sm_90")
    cache = tmp_path / "cache"
    monkeypatch.setenv(native.CACHE_ENV, str(cache))
    return cache


def write_candidate(root: Path, source: str = SCALE, functions: tuple[str, ...] = ("scale_launch",)
                    ) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "kernel.cu").write_text(source)
    (root / "kernel.py").write_text(ENTRY.format(functions=list(functions)))
    return root


def load_entry(root: Path):
    return CudaBackend().load_callable(root, "kernel.py:scale", f"aka_t_{uuid.uuid4().hex[:10]}")


@needs_nvcc
@pytest.mark.slow
def test_compile_only_builds_a_loadable_library_for_sm_90(tmp_path: Path, compile_only: Path) -> None:
    fn = load_entry(write_candidate(tmp_path / "cand"))
    assert callable(fn)
    (folder,) = [p for p in (compile_only / "cuda").iterdir() if p.is_dir()]
    library = folder / "lib.so"
    assert library.is_file()
    assert "-arch=sm_90" in (folder / "build.log").read_text()
    # The launcher is exported: the library loads here (the CUDA runtime is linked statically).
    assert hasattr(ctypes.CDLL(str(library)), "scale_launch")
    # In a compile-only evaluation nothing is launched.
    CudaBackend().prepare(fn, {"x": None, "a": 1.0})


@needs_nvcc
@pytest.mark.slow
def test_an_unchanged_candidate_is_not_rebuilt(tmp_path: Path, compile_only: Path) -> None:
    root = write_candidate(tmp_path / "cand")
    paths = native.resolve_sources(["kernel.cu"], root)
    from aka_backend_cuda.toolchain import require_nvcc

    nvcc = require_nvcc()
    command = build_command(nvcc, paths, "sm_90", [])
    first = native.build("cuda", paths, [command], identity=native.tool_identity(nvcc), root=root)
    again = native.build("cuda", paths, [command], identity=native.tool_identity(nvcc), root=root)
    assert not first.cached and again.cached and again.folder == first.folder
    (root / "kernel.cu").write_text(SCALE.replace("a * x[i]", "x[i] * a"))
    changed = native.build("cuda", paths, [command], identity=native.tool_identity(nvcc), root=root)
    assert not changed.cached and changed.key != first.key


@needs_nvcc
@pytest.mark.slow
def test_a_compile_error_names_the_cu_file_and_line(tmp_path: Path, compile_only: Path) -> None:
    with pytest.raises(BuildError) as info:
        load_entry(write_candidate(tmp_path / "cand", BROKEN))
    assert (info.value.file, info.value.line) == ("kernel.cu", BROKEN_LINE)
    assert "undeclared" in info.value.message and "nvcc (sm_90) failed" in info.value.message


@needs_nvcc
@pytest.mark.slow
def test_a_missing_launcher_is_a_build_error(tmp_path: Path, compile_only: Path) -> None:
    with pytest.raises(BuildError, match=r"exports no function 'scale_launchh'.*extern \"C\""):
        load_entry(write_candidate(tmp_path / "cand", functions=("scale_launchh",)))


def test_without_nvcc_the_build_says_what_to_install(tmp_path: Path, compile_only: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("aka_backend_cuda.require_nvcc", lambda: (_ for _ in ()).throw(
        BuildError("nvcc not found: install the CUDA toolkit")))
    with pytest.raises(BuildError, match="nvcc not found"):
        load_entry(write_candidate(tmp_path / "cand"))


def test_the_backend_is_a_python_backend_with_its_own_readiness() -> None:
    backend = CudaBackend()
    assert isinstance(backend, PythonBackend)
    ready = backend.readiness()
    assert ready.vendors == ("nvidia",)
    assert ready.build == (find_nvcc() is not None)
