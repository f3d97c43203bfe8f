"""The hip backend on a host without an AMD GPU: compile-only builds with clang for gfx942."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import torch
from aka_backend_hip import HipBackend, aka_register_backends, load
from aka_backend_hip.toolchain import (
    DEFAULT_ARCHITECTURE,
    compile_only_build,
    find_clang,
    hip_include_dir,
    supports_architecture,
)

from aka_core.plugin import BuildError, native
from aka_core.testing import BackendContract

SCALE = """\
#include <hip/hip_runtime.h>
#include <stdint.h>

__global__ void scale_kernel(const float* x, float* y, float a, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

extern "C" int scale_launch(const void* x, void* y, float a, int64_t n, hipStream_t stream) {
  if (n <= 0) return 0;
  hipLaunchKernelGGL(scale_kernel, dim3((unsigned)((n + 255) / 256)), dim3(256), 0, stream,
                     (const float*)x, (float*)y, a, n);
  return (int)hipGetLastError();
}
"""

ENTRY = """\
import torch

from aka_backend_hip import load

_lib = load("kernel.hip", functions={functions!r})


def scale(x: torch.Tensor, a: float) -> torch.Tensor:
    y = torch.empty_like(x)
    _lib.scale_launch(x, y, float(a), x.numel())
    return y
"""

BROKEN_LINE = 6  # the line of SCALE that BROKEN changes
BROKEN = SCALE.replace("if (i < n) y[i] = a * x[i];", "if (i < n) y[i] = a * x[i] + undeclared;")


def _hip_toolchain() -> str | None:
    clang = find_clang()
    if clang is None:
        return "no HIP-capable clang (clang++ 17 or newer) on this host"
    if hip_include_dir() is None:
        return "no HIP headers (hip/hip_runtime.h) on this host"
    if not supports_architecture(clang, DEFAULT_ARCHITECTURE):
        return f"{clang} cannot build for {DEFAULT_ARCHITECTURE}"
    return None


needs_clang = pytest.mark.skipif(_hip_toolchain() is not None, reason=str(_hip_toolchain()))


class TestHipContract(BackendContract):
    record = aka_register_backends()[0]


@pytest.fixture
def compile_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A compile-only environment for gfx942 with a build cache of its own."""
    monkeypatch.setenv(native.COMPILE_ONLY_ENV, "1")
    monkeypatch.setenv(native.TARGET_ARCH_ENV, "gfx942")
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "candidate"
    folder.mkdir()
    return folder


def _candidate(folder: Path, source: str = SCALE, functions: tuple[str, ...] = ("scale_launch",)
               ) -> None:
    (folder / "kernel.hip").write_text(source, encoding="utf-8")
    (folder / "kernel.py").write_text(ENTRY.format(functions=list(functions)), encoding="utf-8")


def _load(folder: Path):
    return HipBackend().load_callable(folder, "kernel.py:scale", f"aka_hip_{uuid.uuid4().hex[:12]}")


def test_record_builds_compile_only_for_gfx942() -> None:
    spec = aka_register_backends()[0]
    assert (spec.name, spec.compile_only_architecture) == ("hip", "gfx942")


def test_readiness_names_the_compiler_and_the_vendor() -> None:
    ready = HipBackend().readiness()
    assert ready.vendors == ("amd",)
    if _hip_toolchain() is None:
        assert ready.build and "clang" in ready.detail


@needs_clang
def test_compile_only_build_produces_gfx942_assembly_and_a_host_object(compile_only: Path) -> None:
    _candidate(compile_only)
    fn = _load(compile_only)
    with pytest.raises(RuntimeError, match="built for gfx942 only"):
        fn(torch.ones(4), 2.0)
    library = fn.__globals__["_lib"]
    assert isinstance(library, native.CompiledOnly) and library.architecture == "gfx942"
    assembly = (library.folder / "device-gfx942.s").read_text()
    assert "gfx942" in assembly and "scale_kernel" in assembly
    assert (library.folder / "host.o").is_file()


@needs_clang
def test_compile_error_names_the_hip_file_and_line(compile_only: Path) -> None:
    _candidate(compile_only, BROKEN)
    with pytest.raises(BuildError) as info:
        _load(compile_only)
    assert info.value.file == "kernel.hip"
    assert info.value.line == BROKEN_LINE
    assert "undeclared" in info.value.message


@needs_clang
def test_missing_launcher_is_a_build_error_naming_the_file(compile_only: Path) -> None:
    _candidate(compile_only, functions=("scale_launch", "absent_launch"))
    with pytest.raises(BuildError) as info:
        _load(compile_only)
    assert info.value.file == "kernel.hip"
    assert "absent_launch" in info.value.message


@needs_clang
def test_a_kernel_without_extern_c_launcher_is_missing(compile_only: Path) -> None:
    mangled = SCALE.replace('extern "C" int scale_launch', "int scale_launch")
    _candidate(compile_only, mangled)
    with pytest.raises(BuildError, match="scale_launch"):
        _load(compile_only)


@needs_clang
def test_unchanged_source_is_not_rebuilt_and_a_change_is(compile_only: Path) -> None:
    source = compile_only / "kernel.hip"
    source.write_text(SCALE, encoding="utf-8")
    first, _ = compile_only_build([source], "gfx942", (), compile_only)
    again, _ = compile_only_build([source], "gfx942", (), compile_only)
    assert not first.cached and again.cached and again.folder == first.folder
    source.write_text(SCALE.replace("a * x[i]", "x[i] * a"), encoding="utf-8")
    changed, _ = compile_only_build([source], "gfx942", (), compile_only)
    assert not changed.cached and changed.key != first.key


@needs_clang
def test_an_unknown_architecture_is_a_build_error(compile_only: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.TARGET_ARCH_ENV, "gfx9999")
    _candidate(compile_only)
    with pytest.raises(BuildError, match="cannot build for gfx9999"):
        _load(compile_only)


@needs_clang
def test_load_resolves_sources_beside_the_caller(compile_only: Path) -> None:
    (compile_only / "kernel.hip").write_text(SCALE, encoding="utf-8")
    library = load(compile_only / "kernel.hip", functions=["scale_launch"])
    assert isinstance(library, native.CompiledOnly)
    with pytest.raises(BuildError, match="source file not found"):
        load("no_such_kernel.hip")


def test_prepare_does_not_run_in_compile_only_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.COMPILE_ONLY_ENV, "1")

    def never(**_: object) -> None:
        raise AssertionError("a compile-only evaluation must not launch anything")

    HipBackend().prepare(never, {})


def test_describe_device_says_compile_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.COMPILE_ONLY_ENV, "1")
    monkeypatch.setenv(native.TARGET_ARCH_ENV, "gfx942")
    info = HipBackend().describe_device("cpu")
    assert "compile-only for gfx942" in info.software["mode"]


@needs_clang
def test_several_sources_build_each_and_find_the_launchers_in_any(compile_only: Path) -> None:
    (compile_only / "kernel.hip").write_text(SCALE, encoding="utf-8")
    (compile_only / "extra.hip").write_text(
        '#include <hip/hip_runtime.h>\n#include <stdint.h>\n\nextern "C" int extra_launch('
        "hipStream_t stream) { return 0; }\n", encoding="utf-8")
    library = load(compile_only / "kernel.hip", compile_only / "extra.hip",
                   flags=["--offload-arch=gfx90a"], functions=["scale_launch", "extra_launch"])
    assert isinstance(library, native.CompiledOnly)
    names = sorted(p.name for p in library.folder.iterdir() if p.suffix in (".s", ".o"))
    assert names == ["device-gfx942-0-kernel.s", "device-gfx942-1-extra.s", "host-0-kernel.o",
                     "host-1-extra.o"]
