"""The HIP tasks' kernels, run on the CPU through the HIP emulator next to this file.

No AMD GPU is available to CI, which therefore only compiles the HIP kernels for gfx942
(tests/corpus/test_compile_only.py). Here the same sources are built with g++ against
``hip_runtime.h`` (one std::thread per GPU thread, wave64 shuffles, std::barrier for
__syncthreads) and run on small inputs: a check of their logic (index math, bounds, barriers,
reductions, the dispatch between code paths), not of their speed or of how they run on a GPU.

For every task whose backend is ``hip``, the HIP baseline (when the baseline is the task's own
kernel.py, as in hip2hip; a PyTorch baseline is not HIP and is left out) and the stored solution
(tests/solutions) are imported with ``aka_backend_hip.load`` replaced by the emulator's, so that
kernel.py's wrapper code runs too, and compared with the task's reference on the task's inputs
(device "cpu") with the task's tolerance; a solution's outputs must also have the baseline's
number, shapes and dtypes, as the evaluator requires. The shapes (``SHAPES``) are chosen per
task from its kernels, to reach every code path at the smallest size. Every tensor, inputs and
the outputs that kernel.py allocates alike, lies between guard bytes, and outputs start as NaN:
an out-of-bounds write, an out-of-bounds read in a reduction, or an element left unwritten fails
the check.

A new HIP task fails ``test_every_hip_task_has_emulation_shapes`` until it has shapes here.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import shutil
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch

from aka_core.builtin.operator_tasks import load_task
from aka_core.evaluation.checking import (
    as_tensors,
    changed_inputs,
    compare_outputs,
    snapshot_inputs,
    structure_mismatch,
)
from aka_core.models import Task
from aka_core.plugin.host import PluginHost

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
SOLUTIONS = ROOT / "tests" / "solutions"
SEED = 1234


def _load_module(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


emulate = _load_module(Path(__file__).with_name("emulate.py"), "aka_tests_hip_emulate")


class Shape(NamedTuple):
    M: int
    N: int
    misaligned: bool = False
    """Place every tensor one element past a 16-byte boundary (vector paths must not be taken)."""

    @property
    def id(self) -> str:
        return f"M{self.M}xN{self.N}" + ("-misaligned" if self.misaligned else "")


# The row kernels (one block of 256 threads per row; the solutions move packs of W = 8 bf16 when
# N % 8 == 0 and every pointer is 16-byte aligned, else W = 1, and keep up to VPT packs per thread
# in registers, VPT = 1, 2, 4, 8 (and 16 for W = 1), looping over the row beyond): one shape per
# (W, VPT) and per loop, at or just past a path's limit, several with odd M. The baselines (one
# bf16 per thread and step, shared-memory trees) see rows shorter than a block, and longer.
ROW_SHAPES = (
    Shape(3, 8),        # W=8 VPT=1: one pack, only thread 0 holds data
    Shape(1, 2056),     # W=8 VPT=2: 257 packs, one thread holds a second pack
    Shape(2, 8192),     # W=8 VPT=4: every thread holds exactly 4 packs
    Shape(1, 16384),    # W=8 VPT=8: the largest register-held row
    Shape(3, 16392),    # W=8 looped: one pack past the register cache
    Shape(3, 7),        # W=1 VPT=1: N % 8 != 0, fewer columns than a wavefront
    Shape(1, 500),      # W=1 VPT=2
    Shape(2, 900),      # W=1 VPT=4 (the tasks' smoke N is in this range)
    Shape(1, 2047),     # W=1 VPT=8
    Shape(3, 4093),     # W=1 VPT=16: the largest register-held scalar row
    Shape(2, 4097),     # W=1 looped
    Shape(2, 2056, misaligned=True),  # N % 8 == 0 but unaligned pointers: W=1 (VPT=16)
)

# Per task: (M, N) of the task's inputs. Other parameters (dtype, eps) are the smoke case's.
SHAPES: dict[str, tuple[Shape, ...]] = {
    "hip2hip/rms_norm": ROW_SHAPES,
    "hip2hip/softmax": ROW_SHAPES,
    "torch2hip/fused_add_layer_norm": ROW_SHAPES,
    # Baseline: 64 x 4 threads per block, a grid of column blocks by row blocks. Solution: 64 x 64
    # tiles through LDS, masked at the edges of x and y. (The baseline's grid-y cap, M > 262140,
    # and the solution's tile loop, more than 2^20 tiles, need too many blocks to emulate.)
    "hip2hip/transpose": (
        Shape(37, 91),      # 2 tiles cut at row 37, the second also at column 91
        Shape(64, 128),     # whole tiles only: no masking
        Shape(130, 67),     # 3 x 2 tiles, edges of 2 rows and 3 columns
        Shape(1, 200),      # a single row
        Shape(257, 1),      # a single column
    ),
    # Solution: a grid of ceil(N / W / 256) blocks in x by min(M, 65535) in y (M > 65535 loops
    # over rows: too many blocks to emulate), W as in the row kernels.
    "torch2hip/silu_and_mul": (
        Shape(3, 8),        # W=8, one pack: only thread 0 has work
        Shape(2, 2056),     # W=8, 257 packs: a second block in x where only thread 0 has work
        Shape(3, 7),        # W=1, N % 8 != 0
        Shape(2, 600),      # W=1, three blocks in x, the last partial
        Shape(1, 2056, misaligned=True),  # N % 8 == 0, unaligned pointers: W=1
    ),
}


# --------------------------------------------------------------------------- discovery


@functools.cache
def _host() -> PluginHost:
    return PluginHost()


@functools.cache
def _task(task_id: str) -> Task:
    return load_task(TASKS / task_id, task_id, _host())


def _hip_task_ids() -> list[str]:
    ids = []
    for path in sorted(TASKS.rglob("task.yaml")):
        task_id = path.parent.relative_to(TASKS).as_posix()
        if _task(task_id).backend == "hip":
            ids.append(task_id)
    return ids


HIP_TASK_IDS = _hip_task_ids()


def _sides(task_id: str) -> list[str]:
    """The HIP implementations of a task: its baseline when that is kernel.py, and the solution."""
    return (["baseline"] if _task(task_id).baseline_is_initial_candidate else []) + ["solution"]


CASES = [
    pytest.param(task_id, side, shape, id=f"{task_id}-{side}-{shape.id}")
    for task_id in HIP_TASK_IDS
    for side in _sides(task_id)
    for shape in SHAPES.get(task_id, ())
]


# --------------------------------------------------------------------------- loading


def _entry(folder: Path, ref: str, *, emulated: bool) -> Callable[..., Any]:
    """``file.py:function`` from ``folder``; with ``emulated``, its ``load`` builds for the CPU."""
    file, _, attr = ref.partition(":")
    path = folder / file
    name = "aka_tests_hip_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if not emulated:
        return getattr(_load_module(path, name), attr)
    stand_in = types.ModuleType("aka_backend_hip")
    stand_in.load = emulate.load  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "aka_backend_hip", stand_in)
        module = _load_module(path, name)
    return getattr(module, attr)


@functools.cache
def _implementation(task_id: str, side: str) -> Callable[..., Any]:
    task = _task(task_id)
    if side == "baseline":
        return _baseline(task_id)
    return _entry(SOLUTIONS / task_id, task.entrypoint, emulated=True)


@functools.cache
def _baseline(task_id: str) -> Callable[..., Any]:
    """The task's baseline: emulated when it is kernel.py (HIP), else run as it is (PyTorch)."""
    task = _task(task_id)
    return _entry(TASKS / task_id, task.baseline, emulated=task.baseline_is_initial_candidate)


@functools.cache
def _inputs_and_reference(task_id: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    task = _task(task_id)
    return (_entry(TASKS / task_id, task.inputs, emulated=False),
            _entry(TASKS / task_id, task.reference, emulated=False))


# --------------------------------------------------------------------------- guarded memory


class GuardedMemory:
    """Tensors placed between guard bytes (0xff: NaN in every floating dtype).

    Inputs are copied in; outputs allocated with torch.empty / torch.empty_like inside
    ``allocating()`` land here too, filled with 0xff, so unwritten elements read as NaN.
    """

    GUARD = 16384

    def __init__(self) -> None:
        self._placed: list[tuple[torch.Tensor, int, int]] = []

    def _place(self, shape: torch.Size, dtype: torch.dtype, shift: int) -> torch.Tensor:
        size = torch.Size(shape).numel() * dtype.itemsize
        buffer = torch.full((2 * self.GUARD + shift + size,), 0xFF, dtype=torch.uint8)
        start = self.GUARD + shift
        self._placed.append((buffer, start, size))
        return buffer[start:start + size].view(dtype).view(shape)

    def copy(self, tensor: torch.Tensor, *, misaligned: bool = False) -> torch.Tensor:
        placed = self._place(tensor.shape, tensor.dtype, tensor.element_size() if misaligned else 0)
        placed.copy_(tensor)
        return placed

    @contextmanager
    def allocating(self, *, misaligned: bool = False) -> Iterator[None]:
        def wrap(allocate: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
            def allocate_guarded(*args: Any, **kwargs: Any) -> torch.Tensor:
                tensor = allocate(*args, **kwargs)
                if tensor.device.type != "cpu" or not tensor.is_contiguous():
                    return tensor
                shift = tensor.element_size() if misaligned else 0
                return self._place(tensor.shape, tensor.dtype, shift)
            return allocate_guarded

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(torch, "empty", wrap(torch.empty))
            patch.setattr(torch, "empty_like", wrap(torch.empty_like))
            yield

    def damaged_guards(self) -> int:
        """How many guard bytes changed: writes out of bounds."""
        damaged = 0
        for buffer, start, size in self._placed:
            guards = torch.cat([buffer[:start], buffer[start + size:]])
            damaged += int((guards != 0xFF).sum())
        return damaged


# --------------------------------------------------------------------------- the check


def check(task_id: str, fn: Callable[..., Any], shape: Shape,
          baseline: Callable[..., Any] | None = None) -> list[str]:
    """What is wrong with ``fn`` on ``shape`` (empty: nothing), as the evaluator judges it.

    Its outputs are compared with the task's reference, with the task's tolerance, and with a
    ``baseline``'s for their number, shape, dtype and device; its inputs must stay unchanged.
    """
    task = _task(task_id)
    make_inputs, reference = _inputs_and_reference(task_id)
    assert task.smoke_case is not None
    params = {**task.smoke_case.params, "M": shape.M, "N": shape.N}
    inputs = make_inputs(params, SEED, "cpu")
    expected = as_tensors(reference(**inputs))

    memory = GuardedMemory()
    placed = {k: memory.copy(v, misaligned=shape.misaligned) if isinstance(v, torch.Tensor) else v
              for k, v in inputs.items()}
    before = snapshot_inputs(placed)
    with memory.allocating(misaligned=shape.misaligned):
        outputs = as_tensors(fn(**placed))

    problems = []
    if baseline is not None:
        mismatch = structure_mismatch(outputs, as_tensors(baseline(**inputs)))
        if mismatch:
            return [f"{mismatch} (the baseline's); not compared further"]
    result = compare_outputs(outputs, expected, task.tolerance)
    if not result["passed"]:
        problems.append(f"differs from the reference: {result['reason']}")
    changed = changed_inputs(placed, before)
    if changed:
        problems.append(f"modified its inputs {changed}")
    damaged = memory.damaged_guards()
    if damaged:
        problems.append(f"wrote out of bounds ({damaged} guard bytes changed)")
    return problems


@pytest.fixture(scope="module")
def emulator() -> None:
    reason = emulate.unavailable_reason()
    if reason:
        pytest.skip(f"the HIP CPU emulator cannot build here: {reason}")


def test_every_hip_task_has_emulation_shapes() -> None:
    assert HIP_TASK_IDS, "no task with backend hip found"
    missing = [t for t in HIP_TASK_IDS if not SHAPES.get(t)]
    assert not missing, f"choose SHAPES covering every code path of the kernels of {missing}"
    stale = sorted(set(SHAPES) - set(HIP_TASK_IDS))
    assert not stale, f"SHAPES names tasks that are not HIP tasks: {stale}"


@pytest.mark.slow
@pytest.mark.usefixtures("emulator")
@pytest.mark.parametrize(("task_id", "side", "shape"), CASES)
def test_kernel_matches_reference_emulated(task_id: str, side: str, shape: Shape) -> None:
    baseline = _baseline(task_id) if side == "solution" else None
    problems = check(task_id, _implementation(task_id, side), shape, baseline)
    assert not problems, f"{task_id} {side} on {shape.id}: " + "; ".join(problems)


# --------------------------------------------------------------------------- negative tests

MUTATIONS = {
    # The wavefront butterfly starts at 16 lanes apart instead of 32: each wave's sum misses half.
    "reduction": ("hip2hip/rms_norm", "for (int offset = kWave / 2;", "for (int offset = kWave / 4;",
                  Shape(2, 4096)),
    # The store phase no longer masks the columns of x past N: edge tiles write past y's end.
    "bounds": ("hip2hip/transpose", "if (c0 + c < n && out_col < m)", "if (out_col < m)",
               Shape(37, 91)),
    # The last pack of every row is never written: those outputs keep their NaN poison.
    "unwritten": ("torch2hip/silu_and_mul", "if (p >= packs) return;", "if (p + 1 >= packs) return;",
                  Shape(3, 7)),
}


@pytest.mark.slow
@pytest.mark.usefixtures("emulator")
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_emulator_catches_a_broken_solution(mutation: str, tmp_path: Path) -> None:
    task_id, old, new, shape = MUTATIONS[mutation]
    task = _task(task_id)
    broken = tmp_path / "solution"
    shutil.copytree(SOLUTIONS / task_id, broken)
    source = broken / "kernel.hip"
    text = source.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"the solution no longer contains {old!r}: update MUTATIONS"
    source.write_text(text.replace(old, new), encoding="utf-8")

    assert check(task_id, _implementation(task_id, "solution"), shape) == []
    problems = check(task_id, _entry(broken, task.entrypoint, emulated=True), shape)
    assert problems, f"the {mutation} bug in {task_id} went unnoticed"


# --------------------------------------------------------------------------- the emulator itself

SELF_TEST = r"""
#include <hip/hip_runtime.h>
#include <stdint.h>

#include "self_test.h"  // next to the source: kThreads

typedef int32_t i32x2 __attribute__((ext_vector_type(2)));

__global__ void shuffles(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  const int v = 1000 * static_cast<int>(blockIdx.x) + t;
  int* o = out + 5 * (blockIdx.x * blockDim.x + t);
  o[0] = __shfl_xor(v, 1);
  o[1] = __shfl_down(v, 3, 16);
  o[2] = __shfl_up(v, 5, 32);
  o[3] = __shfl(v, 7, 8);
  i32x2 pair = {v, -v};
  o[4] = pair[1];
}

__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float partial[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  float s = 0.0f;
  for (int i = t; i < n; i += kThreads) s += x[i];
  partial[t] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[0] = partial[0];
  atomicAdd(out + 1, s);
}

__global__ void nothing() {}

__global__ void half_wave_exits(float* out) {
  if (threadIdx.x >= 32) return;
  out[threadIdx.x] = __shfl_xor(1.0f, 32);
}

extern "C" int run_shuffles(void* out, hipStream_t stream) {
  shuffles<<<2, 128, 0, stream>>>(static_cast<int*>(out));
  return static_cast<int>(hipGetLastError());
}

extern "C" int run_block_sum(const void* x, void* out, int64_t n, hipStream_t stream) {
  hipLaunchKernelGGL(block_sum, dim3(1), dim3(kThreads), 0, stream, static_cast<const float*>(x),
                     static_cast<float*>(out), static_cast<int>(n));
  return static_cast<int>(hipGetLastError());
}

extern "C" int run_nothing(int64_t threads, hipStream_t stream) {
  nothing<<<dim3(1), dim3(static_cast<unsigned>(threads)), 0, stream>>>();
  return static_cast<int>(hipGetLastError());
}

extern "C" int run_half_wave_exits(void* out, hipStream_t stream) {
  half_wave_exits<<<1, 64, 0, stream>>>(static_cast<float*>(out));
  return static_cast<int>(hipGetLastError());
}
"""


def _hip_shuffle_source(lane: int, rule: str, arg: int, width: int) -> int:
    """The lane a HIP shuffle reads (amd_warp_functions.h), within a 64-lane wavefront."""
    if rule == "xor":
        index = lane ^ arg
        return lane if index >= ((lane + width) & ~(width - 1)) else index
    if rule == "down":
        return lane if (lane & (width - 1)) + arg >= width else lane + arg
    if rule == "up":
        return lane if lane - arg < (lane & ~(width - 1)) else lane - arg
    return (arg + (lane & ~(width - 1))) & 63


def test_rewrite_turns_launches_into_calls() -> None:
    text = ("#include <hip/hip_runtime.h>\n"
            "typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));\n"
            "k<W, 1><<<grid,\n block, 0, s>>>(a, b);\n"
            "empty<<<1, 64>>>();\n")
    out = emulate.rewrite(text, "k.hip").splitlines()
    assert out == ['#line 1 "k.hip"',
                   '#include "hip_runtime.h"',
                   "typedef uint32_t u32x4 __attribute__((vector_size(4 * sizeof(uint32_t))));",
                   "emu_launch(k<W, 1>, emu_cfg(grid,",
                   " block, 0, s), a, b);",
                   "emu_launch(empty, emu_cfg(1, 64));"]


@pytest.mark.slow
@pytest.mark.usefixtures("emulator")
def test_emulator_semantics(tmp_path: Path) -> None:
    source = tmp_path / "self_test.hip"
    source.write_text(SELF_TEST, encoding="utf-8")
    (tmp_path / "self_test.h").write_text("constexpr int kThreads = 256;\n", encoding="utf-8")
    lib = emulate.build([source])

    out = torch.zeros((2, 128, 5), dtype=torch.int32)
    lib.run_shuffles(out)
    for block in range(2):
        for t in range(128):
            wave, lane = divmod(t, 64)
            value = [1000 * block + 64 * wave + _hip_shuffle_source(lane, rule, arg, width)
                     for rule, arg, width in (("xor", 1, 64), ("down", 3, 16), ("up", 5, 32),
                                              ("index", 7, 8))]
            assert out[block, t].tolist() == [*value, -(1000 * block + t)], (block, t)

    x = torch.arange(1000, dtype=torch.float32)
    totals = torch.zeros(2)
    lib.run_block_sum(x, totals, x.numel())
    assert totals.tolist() == [float(x.sum())] * 2  # the tree and the atomics (exact: integers)

    lib.run_nothing(1024)
    with pytest.raises(RuntimeError, match="more than 1024 threads per block"):
        lib.run_nothing(1025)
    with pytest.raises(RuntimeError, match="an empty grid or block"):
        lib.run_nothing(0)
    with pytest.raises(RuntimeError, match=r"shuffle read lane \d+, which has returned"):
        lib.run_half_wave_exits(torch.zeros(64))
    lib.run_nothing(64)  # the errors were reported once and cleared

    with pytest.raises(TypeError, match="need host memory"):
        lib.run_nothing(torch.zeros(1, device="meta"))
