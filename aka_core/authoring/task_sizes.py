"""Sizes of a drafted task: the typical case, the held-out ranges, the smoke case, the probes.

Each symbol of the reference's shapes (``M``, ``N`` ...) is a param of every case:

* **typical** (the visible case): the reference's ``Sizes:``, else a default that makes the
  largest input about 2^26 elements;
* **held-out draws**: an inclusive range from a prime near 0.6x to a prime near 2^(0.9/k)x the
  typical size (k: the symbols that vary), so the drawn sizes are odd and the largest corner
  stays within twice the typical case's work; symbols under 64 (head sizes and the like) stay
  fixed;
* **smoke** and **alt** (two tiny probes): distinct primes per symbol, larger for the last axes
  (a reduction's length) than for the leading ones, so that an output dimension can be traced
  back to the one symbol that has its value in both probes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from aka_core.authoring.task_spec import ReferenceSpec

FIXED_BELOW = 64
LARGEST_INPUT_LOG2 = 26
# First candidates for the probes' primes, by how far from the last axis a symbol first sits:
# the last axis gets ~1000 (past a kernel's block size), the one before ~40, earlier ones less.
SMOKE_START = {0: 1009, 1: 37, 2: 11, 3: 5}
ALT_START = {0: 1051, 1: 53, 2: 19, 3: 2}


@attrs.frozen(kw_only=True)
class Sizes:
    typical: dict[str, int]
    smoke: dict[str, int]
    alt: dict[str, int]
    draws: dict[str, object]
    """Each symbol's held-out spec: ``{"range": [lo, hi]}`` or a fixed size."""


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


def next_prime(n: int) -> int:
    while not is_prime(n):
        n += 1
    return n


def prev_prime(n: int) -> int:
    while n > 2 and not is_prime(n):
        n -= 1
    return n


def plan_sizes(spec: ReferenceSpec) -> Sizes:
    symbols = spec.symbols
    largest = max((len(t.dims) for t in spec.tensors), default=1) or 1
    default = 2 ** round(LARGEST_INPUT_LOG2 / largest)
    typical = {s: spec.sizes.get(s, default) for s in symbols}
    varied = [s for s in symbols if typical[s] >= FIXED_BELOW]
    draws: dict[str, object] = {}
    for s in symbols:
        if s not in varied:
            draws[s] = typical[s]
            continue
        t = typical[s]
        lo = next_prime(max(2, int(t * 0.6)))
        hi = prev_prime(int(t * 2 ** (0.9 / len(varied))))
        draws[s] = {"range": [min(lo, hi), max(lo, hi)]}
    groups = _axis_groups(spec)
    return Sizes(typical=typical, smoke=_probe(symbols, varied, typical, groups, SMOKE_START),
                 alt=_probe(symbols, varied, typical, groups, ALT_START), draws=draws)


def _axis_groups(spec: ReferenceSpec) -> dict[str, int]:
    """Each symbol's least distance from a tensor's last axis (bounds count as last axes)."""
    groups: dict[str, int] = {}
    for tensor in spec.tensors:
        for index, dim in enumerate(tensor.dims):
            if isinstance(dim, str):
                distance = min(len(tensor.dims) - 1 - index, 3)
                groups[dim] = min(groups.get(dim, 3), distance)
        if isinstance(tensor.bound, str):
            groups[tensor.bound] = 0
    return groups


def _probe(symbols: tuple[str, ...], varied: list[str], typical: Mapping[str, int],
           groups: Mapping[str, int], start: Mapping[int, int]) -> dict[str, int]:
    used = {typical[s] for s in symbols if s not in varied}
    sizes: dict[str, int] = {}
    cursor = dict(start)
    for s in symbols:
        if s not in varied:
            sizes[s] = typical[s]
            continue
        group = groups.get(s, 0)
        value = next_prime(cursor[group])
        while value in used:
            value = next_prime(value + 1)
        used.add(value)
        cursor[group] = value + 1
        sizes[s] = value
    return sizes


def case_name(sizes: Mapping[str, int], dtype: str | None) -> str:
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}
    parts = [f"{s.lower()}{v}" for s, v in sizes.items()]
    if dtype:
        parts.append(short.get(dtype, dtype))
    return "_".join(parts) or "default"
