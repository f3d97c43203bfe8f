"""What a CUDA candidate's build costs: the cuda backend's nvcc + ctypes route, cold and cached,
against PyTorch's C++ extension builder (``torch.utils.cpp_extension.load_inline``) building the
same kernel, cold, in one run on one machine.

Usage:  python bench/cuda_build_cost.py --out DIR      (needs nvcc; the torch column needs ninja)
Writes DIR/build_cost.json and DIR/build_cost.md and prints the table.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"
SOLUTIONS = ROOT / "tests" / "solutions"

TORCH_BINDING = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>
extern "C" int {fn}({params});
void run({tensors}) {{
  {fn}({args}, at::cuda::getCurrentCUDAStream().stream());
}}
"""


def cuda_sources() -> list[tuple[str, Path]]:
    out = []
    for folder in (TASKS, SOLUTIONS):
        for path in sorted(folder.rglob("kernel.cu")):
            if "extern \"C\"" in path.read_text() and "__global__" in path.read_text():
                out.append((f"{path.parent.relative_to(folder).as_posix()} "
                            f"({'solution' if folder == SOLUTIONS else 'baseline'})", path))
    return out


def time_native(path: Path, cache: Path) -> dict[str, float]:
    """Cold then cached build through the backend, each in a fresh Python process."""
    code = ("import time, sys; t = time.perf_counter(); from aka_backend_cuda import load; "
            f"load({str(path)!r}); print(time.perf_counter() - t)")
    env = {**os.environ, "AKA_BUILD_CACHE": str(cache)}
    times = {}
    for label in ("cold_s", "cached_s"):
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=False)
        if proc.returncode:
            return {"error": proc.stderr[-800:]}
        times[label] = float(proc.stdout.strip().splitlines()[-1])
    return times


def time_torch_extension(path: Path, build_dir: Path) -> dict[str, Any]:
    """The same .cu through load_inline (a cold build: fresh build directory)."""
    source = path.read_text()
    # A binding for the first launcher, taking raw pointers as the ctypes route does.
    import re

    match = re.search(r'extern "C" int (\w+)\(([^)]*)\)', source)
    if not match:
        return {"error": "no launcher"}
    fn, params = match.group(1), " ".join(match.group(2).split())
    names = [p.strip().split()[-1] for p in params.split(",")][:-1]  # without the stream
    types = [" ".join(p.strip().split()[:-1]) for p in params.split(",")][:-1]
    tensors = ", ".join(f"int64_t {n}" for n in names)
    args = ", ".join(f"({t}){n}" if "*" in t else n for t, n in zip(types, names, strict=True))
    binding = TORCH_BINDING.format(fn=fn, params=params, tensors=tensors, args=args)
    from torch.utils.cpp_extension import load_inline

    started = time.perf_counter()
    try:
        load_inline(name=f"bench_{fn}_{os.getpid()}", cpp_sources="void run(" + tensors + ");",
                    cuda_sources=[source, binding], functions=["run"], build_directory=str(build_dir),
                    extra_cuda_cflags=["-O3", "-std=c++17"], verbose=False)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[-600:]}"}
    return {"cold_s": time.perf_counter() - started}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "bench/results/latest"))
    parser.add_argument("--torch-limit", type=int, default=2,
                        help="how many sources also go through load_inline (about 40 s each)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, (label, path) in enumerate(cuda_sources()):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as build:
            row = {"source": label, "native": time_native(path, Path(cache)),
                   "torch_extension": time_torch_extension(path, Path(build))
                   if index < args.torch_limit else {"error": "not measured (--torch-limit)"}}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    (out / "build_cost.json").write_text(json.dumps(rows, indent=1))
    lines = ["| kernel.cu | nvcc + ctypes, cold s | cached s | torch load_inline, cold s |",
             "|---|---|---|---|"]
    for row in rows:
        n, t = row["native"], row["torch_extension"]
        lines.append(f"| {row['source']} | {n.get('cold_s', float('nan')):.2f} | "
                     f"{n.get('cached_s', float('nan')):.2f} | "
                     + (f"{t['cold_s']:.2f}" if "cold_s" in t else f"error: {t['error'][:80]}")
                     + " |")
    text = "\n".join(lines) + "\n"
    (out / "build_cost.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
