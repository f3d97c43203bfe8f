"""When does a process's CUDA context come to exist, and what does making it cost?

A fresh process imports PyTorch, calls ``torch.cuda.init()``, then ``torch.cuda.mem_get_info()``,
then makes a stream; after each step it says whether the primary context exists and how long the
step took. The runners make their context before the judge holds the GPU (runner.make_context):
this shows which call makes it.

Usage:  python bench/context_probe.py
"""

from __future__ import annotations

import json
import time


def main() -> int:
    started = time.monotonic()
    import torch

    steps = {"import_torch_s": round(time.monotonic() - started, 4)}

    def step(name: str, fn: object) -> None:
        t0 = time.monotonic()
        fn()  # type: ignore[operator]
        steps[f"{name}_s"] = round(time.monotonic() - t0, 4)
        steps[f"context_after_{name}"] = bool(torch._C._cuda_hasPrimaryContext(0))

    step("init", torch.cuda.init)
    step("mem_get_info", torch.cuda.mem_get_info)
    step("stream", torch.cuda.Stream)
    step("first_kernel", lambda: torch.ones(4, device="cuda").sum().item())
    print(json.dumps(steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
