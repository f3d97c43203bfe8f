"""Can a Triton kernel be compiled before the GPU lock, by a process that has no GPU, into the
cache the GPU process then reads? (A question for issue 13: a fresh Triton candidate's JIT
compiles run inside the GPU-exclusive part of its evaluation.)

1. ``--ahead``, in a process that sees no GPU (``CUDA_VISIBLE_DEVICES=""``): Triton's active
   driver is replaced by the builder's (``aka_backend_triton.ahead``), which names this GPU's
   target (``--arch 90``) and launches nothing; the wrapper is called with CPU tensors of the
   case's shapes, which compiles its kernel into ``TRITON_CACHE_DIR``.
2. ``--gpu``, in a process with the GPU and the same cache: the same wrapper on CUDA tensors,
   timed; the cache's files listed before and after. If the first call adds no kernel files and
   takes milliseconds, the key matched and the compile can move before the lock.

Usage:  python bench/triton_ahead_probe.py [--arch 90] [--cache DIR]    (runs both steps)
On a CPU host only step 1 runs (it still shows the cubin being produced for the target).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 2.0 + 1.0).to(y_ptr.dtype.element_ty), mask=mask)


def scale(x):
    y = x.new_empty(x.shape)
    n = x.numel()
    _scale[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y
'''


def files(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())


def step(mode: str, arch: int, cache: Path, folder: Path) -> dict:
    sys.path.insert(0, str(folder))
    import torch

    if mode == "ahead":  # the builder's own driver (aka_backend_triton.ahead), as prebuild uses it
        from aka_backend_triton import ahead

        assert ahead.install(f"sm_{arch}")
    import probe_kernel

    x = torch.empty(1 << 22, dtype=torch.bfloat16, device="cpu" if mode == "ahead" else "cuda")
    before = files(cache)
    started = time.perf_counter()
    probe_kernel.scale(x)
    if mode == "gpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    return {"mode": mode, "first_call_s": round(seconds, 4), "files_before": len(before),
            "new_files": sorted(set(files(cache)) - set(before))}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--step", choices=["ahead", "gpu"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(step(args.step, args.arch, args.cache, args.folder)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="aka-triton-ahead-"))
    cache = args.cache or work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    (work / "probe_kernel.py").write_text(KERNEL)
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    rows = []
    runs = [("ahead", {"CUDA_VISIBLE_DEVICES": ""})]
    import torch

    if torch.cuda.is_available():
        runs.append(("gpu", {}))
    for mode, extra in runs:
        done = subprocess.run([sys.executable, __file__, "--step", mode, "--arch", str(args.arch),
                               "--cache", str(cache), "--folder", str(work)],
                              env={**env, **extra}, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            rows.append({"mode": mode, "error": done.stderr[-2000:]})
            break
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for row in rows:
        print(json.dumps(row))
    gpu = next((r for r in rows if r.get("mode") == "gpu"), None)
    if gpu is not None:
        compiled = [f for f in gpu.get("new_files", []) if f.endswith((".cubin", ".ptx"))]
        print("the GPU process " + ("compiled again: the keys differ" if compiled else
                                    "found the kernel compiled ahead (only its launcher, if "
                                    "anything, was new)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
