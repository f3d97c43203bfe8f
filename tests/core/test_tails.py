"""A log's tail is read from its end: a candidate that prints gigabytes must not make aka read
them into memory."""

from __future__ import annotations

import resource
from pathlib import Path

from aka_core.tails import tail


def test_the_tail_of_a_huge_log_is_read_from_its_end(tmp_path: Path) -> None:
    log = tmp_path / "candidate.log"
    with open(log, "wb") as handle:  # sparse: 4 GiB of zeros on disk cost nothing
        handle.seek(4 * 2**30)
        handle.write("the last line: é\n".encode())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text = tail(log, 100)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert text.endswith("the last line: é\n") and len(text.encode()) <= 100
    assert grown_kib < 64 * 1024, f"reading the tail grew memory by {grown_kib} KiB"


def test_a_missing_log_has_an_empty_tail(tmp_path: Path) -> None:
    assert tail(tmp_path / "none.log") == ""
