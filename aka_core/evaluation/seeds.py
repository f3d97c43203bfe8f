"""What the judge derives from an evaluation's secret: seeds, and the held-out cases drawn with
them. The secret never leaves the judge; neither do these."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any


def derive_seed(secret: int, *parts: object) -> int:
    digest = hashlib.blake2b(":".join([str(secret), *map(str, parts)]).encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "little") >> 1


def draw_held_out(draws: Any, seed: int) -> list[Any]:
    """Concrete held-out cases from their ranges, drawn with ``seed`` (derived from the secret)."""
    from aka_core.models import Case

    rng = random.Random(seed)
    cases = []
    for index in range(draws.count):
        params: dict[str, Any] = {}
        for name, spec in draws.params.items():
            if isinstance(spec, Mapping) and "range" in spec:
                lo, hi = int(spec["range"][0]), int(spec["range"][1])
                step = int(spec.get("multiple_of", 1))
                first = -(-lo // step) * step
                params[name] = first + step * rng.randint(0, max(0, (hi - first) // step))
            elif isinstance(spec, Mapping) and "choice" in spec:
                params[name] = rng.choice(list(spec["choice"]))
            else:
                params[name] = spec
        cases.append(Case(name=f"held_out_{index}", params=params))
    return cases
