"""Diagnostics: the judge's seconds by named step (of a block, a case, a phase), for the record."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping


class Steps:
    """Each call adds the seconds since the last one (or since made, or since ``skip``) to
    ``into[name]``."""

    def __init__(self, into: dict[str, float]):
        self.into = into
        self.last = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.into[name] = self.into.get(name, 0.0) + now - self.last
        self.last = now

    def skip(self) -> None:
        """What ran since the last step is not counted (it is counted elsewhere)."""
        self.last = time.monotonic()


def summed_seconds(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The seconds of each named step over ``parts`` (one per case, say), rounded for the
    record."""
    total: dict[str, float] = {}
    for part in parts:
        for name, seconds in part.items():
            total[name] = total.get(name, 0.0) + seconds
    return {name: round(seconds, 4) for name, seconds in total.items()}
