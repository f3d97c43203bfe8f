"""The FlyDSL backend on a CPU host: compile-only builds for gfx942, compile errors at file:line."""

from __future__ import annotations

import struct
import sys
import uuid
from pathlib import Path

import pytest
from aka_backend_flydsl import FlydslBackend, aka_register_backends, frameworks_used, side_of
from aka_backend_flydsl.builds import AMDGPU_MACH, check_code_object

from aka_core.plugin import BuildError
from aka_core.testing import BackendContract

GOOD_KERNEL = '''\
import flydsl.compiler as flyc
import flydsl.expr as fx
import torch


@flyc.kernel
def scale_kernel(X: fx.Tensor, Y: fx.Tensor, n: fx.Int32):
    i = fx.block_idx.x * 64 + fx.thread_idx.x
    if i < n:
        xs = fx.logical_divide(X, fx.make_layout(1, 1))
        ys = fx.logical_divide(Y, fx.make_layout(1, 1))
        atom = fx.make_copy_atom(fx.UniversalCopy32b(), fx.Float32)
        r = fx.make_rmem_tensor(1, fx.Float32)
        fx.copy_atom_call(atom, fx.slice(xs, (None, i)), r)
        fx.memref_store_vec(fx.memref_load_vec(r) * 2.0, r)
        fx.copy_atom_call(atom, r, fx.slice(ys, (None, i)))


@flyc.jit
def scale_launch(X: fx.Tensor, Y: fx.Tensor, n: fx.Int32):
    scale_kernel(X, Y, n).launch(grid=((n + 63) // 64, 1, 1), block=(64, 1, 1))


def scale(x):
    y = torch.empty_like(x)
    scale_launch(x, y, x.numel())
    return y
'''

# Stores a bfloat16 vector into a float32 register tensor: MLIR verification fails there.
BAD_KERNEL = GOOD_KERNEL.replace(
    "        fx.memref_store_vec(fx.memref_load_vec(r) * 2.0, r)\n",
    "        fx.memref_store_vec(fx.memref_load_vec(r).to(fx.BFloat16), r)\n")
BAD_LINE = next(i for i, line in enumerate(BAD_KERNEL.splitlines(), 1) if "BFloat16" in line)

TORCH_ONLY = "def scale(x):\n    return x * 2.0\n"

TRITON_KERNEL = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def scale(x):
    y = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y
'''

FLYDSL_VARIABLES = ("COMPILE_ONLY", "ARCH", "FLYDSL_GPU_ARCH", "ROCM_PATH", "FLYDSL_RUNTIME_CACHE_DIR")


class TestFlydslContract(BackendContract):
    @pytest.fixture
    def record(self):
        return aka_register_backends()[0]


def test_record_builds_for_gfx942_without_a_gpu():
    spec = aka_register_backends()[0]
    assert spec.name == "flydsl"
    assert spec.compile_only_architecture == "gfx942"


def test_side_comes_from_the_worker_package():
    assert side_of("aka_side_baseline") == "baseline"
    assert side_of("aka_side_baseline_1234") == "baseline"
    assert side_of("aka_side_candidate") == "candidate"
    assert side_of("some_module") == "candidate"


def test_code_object_check_reads_the_elf_machine():
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    struct.pack_into("<H", header, 18, 224)
    struct.pack_into("<I", header, 48, 0x500 | AMDGPU_MACH["gfx942"])
    assert check_code_object(bytes(header), "gfx942") is None
    assert "not gfx950" in (check_code_object(bytes(header), "gfx950") or "")
    assert "not an ELF" in (check_code_object(b"MZ" + bytes(62), "gfx942") or "")


# --------------------------------------------------------------------------- with FlyDSL


@pytest.fixture
def compile_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A compile-only evaluation for gfx942, building into a private cache; restores FlyDSL's
    variables (the backend sets them in os.environ) afterwards."""
    pytest.importorskip("flydsl")
    ready = FlydslBackend().readiness()
    if not ready.build:
        pytest.skip(ready.detail)
    for name in FLYDSL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("AKA_BUILD_CACHE", str(cache))
    monkeypatch.setenv("AKA_COMPILE_ONLY", "1")
    monkeypatch.setenv("AKA_TARGET_ARCH", "gfx942")
    return cache


@pytest.fixture
def package():
    """A private package name per side; its modules leave sys.modules after the test."""
    names: list[str] = []

    def make(side: str) -> str:
        names.append(f"aka_side_{side}_{uuid.uuid4().hex[:8]}")
        return names[-1]

    yield make
    for name in list(sys.modules):
        if any(name == n or name.startswith(n + ".") for n in names):
            del sys.modules[name]


def _candidate(tmp_path: Path, source: str) -> Path:
    folder = tmp_path / "candidate"
    folder.mkdir()
    (folder / "kernel.py").write_text(source, encoding="utf-8")
    return folder


def _inputs():
    import torch

    return {"x": torch.arange(1000, dtype=torch.float32)}


def _machine(path: Path) -> tuple[int, int]:
    blob = path.read_bytes()
    return struct.unpack_from("<H", blob, 18)[0], struct.unpack_from("<I", blob, 48)[0] & 0xFF


def test_compile_only_builds_a_gfx942_code_object(compile_only: Path, package, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]):
    import os

    backend = FlydslBackend()
    fn = backend.load_callable(_candidate(tmp_path, GOOD_KERNEL), "kernel.py:scale", package("candidate"))
    backend.prepare(fn, _inputs())
    assert os.environ["COMPILE_ONLY"] == "1" and os.environ["ARCH"] == "gfx942"
    assert (Path(os.environ["ROCM_PATH"]) / "llvm" / "bin" / "ld.lld").exists()
    objects = sorted((compile_only / "flydsl" / "objects" / "gfx942").glob("*.hsaco"))
    assert [p.name.split("-")[0] for p in objects] == ["scale_launch"]
    assert _machine(objects[0]) == (224, AMDGPU_MACH["gfx942"])  # EM_AMDGPU, gfx942
    assert b"scale_kernel" in objects[0].read_bytes()
    assert "candidate: built flydsl scale_kernel_0 (gfx942" in capsys.readouterr().err


def test_compile_error_points_at_the_candidate_line(compile_only: Path, package, tmp_path: Path):
    backend = FlydslBackend()
    fn = backend.load_callable(_candidate(tmp_path, BAD_KERNEL), "kernel.py:scale", package("candidate"))
    with pytest.raises(BuildError) as info:
        backend.prepare(fn, _inputs())
    assert info.value.file == "kernel.py"
    assert info.value.line == BAD_LINE, BAD_KERNEL.splitlines()[BAD_LINE - 1]
    assert "FlyDSL compilation failed" in info.value.message
    assert not (compile_only / "flydsl" / "objects").exists()


def test_a_candidate_without_flydsl_builds_nothing_and_fails(compile_only: Path, package, tmp_path: Path):
    backend = FlydslBackend()
    fn = backend.load_callable(_candidate(tmp_path, TORCH_ONLY), "kernel.py:scale", package("candidate"))
    with pytest.raises(BuildError, match="uses no FlyDSL") as info:
        backend.prepare(fn, _inputs())
    assert info.value.file == "kernel.py"


def test_a_pytorch_baseline_is_neither_built_nor_run(compile_only: Path, package, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]):
    backend = FlydslBackend()
    fn = backend.load_callable(_candidate(tmp_path, TORCH_ONLY), "kernel.py:scale", package("baseline"))
    assert frameworks_used(next(iter(backend._sides.values()))[1]) == set()
    backend.prepare(fn, {"x": object()})  # calling it would raise: x * 2.0 on an object
    assert "baseline: PyTorch code" in capsys.readouterr().err


def test_a_triton_baseline_is_compiled_for_gfx942(compile_only: Path, package, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("triton")
    backend = FlydslBackend()
    fn = backend.load_callable(_candidate(tmp_path, TRITON_KERNEL), "kernel.py:scale", package("baseline"))
    backend.prepare(fn, _inputs())
    objects = sorted((compile_only / "flydsl" / "objects" / "gfx942").glob("_scale_kernel-*.hsaco"))
    assert len(objects) == 1
    assert _machine(objects[0]) == (224, AMDGPU_MACH["gfx942"])
    assert "baseline: built triton _scale_kernel (gfx942" in capsys.readouterr().err


def test_kernels_compiled_at_import_count_as_built(compile_only: Path, package, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]):
    source = GOOD_KERNEL + (
        "\n\nflyc.compile(scale_launch, torch.zeros(64), torch.zeros(64), 64)  # built at import\n\n\n"
        "def scale_on_host(x):\n    return x * 2.0\n")
    backend = FlydslBackend()
    fn = backend.load_callable(_candidate(tmp_path, source), "kernel.py:scale_on_host", package("candidate"))
    backend.prepare(fn, _inputs())
    assert "candidate: built flydsl scale_kernel_0 (gfx942" in capsys.readouterr().err
