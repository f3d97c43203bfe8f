"""What a side's replies may put in the record (``protocol.source_place``, ``side_facts``): a
side writes its replies itself, and a value the record cannot hold once made the whole record
malformed, an ``infra_error`` retried instead of the side's verdict (``forge_the_failing_line``,
``forge_facts_that_are_not_a_mapping``)."""

from __future__ import annotations

import math

import pytest

from aka_core.evaluation import protocol
from aka_core.evaluation.record import as_record


@pytest.mark.parametrize("line", ["7a", "7", math.inf, math.nan, 7.0, True, -1, 10**10, [1, 2],
                                  {"a": 1}])
def test_a_line_that_is_not_a_small_count_is_none(line: object) -> None:
    assert protocol.source_place("kernel.py", line) == {"file": "kernel.py", "line": None}


def test_a_line_and_a_file_the_record_can_hold_are_kept() -> None:
    assert protocol.source_place("kernel.py", 12) == {"file": "kernel.py", "line": 12}
    assert protocol.source_place(None, None) == {"file": None, "line": None}


def test_a_file_is_a_short_string_or_none() -> None:
    place = protocol.source_place("k" * 200_000_000, 3)
    assert len(place["file"]) == protocol.MAX_FILE_CHARS and place["line"] == 3
    assert protocol.source_place(["kernel.py"], 3)["file"] is None
    assert protocol.source_place(b"kernel.py", 3)["file"] is None


def test_whatever_the_side_said_its_failure_structures_as_a_record() -> None:
    for file, line in [("x" * 10**6, math.inf), ({"deep": [1]}, "7a"), (None, math.nan)]:
        failure = {"kind": "compile", "message": "no", **protocol.source_place(file, line)}
        assert as_record({"failure": failure}).failure.kind.value == "compile"


@pytest.mark.parametrize("facts", [["not", "a", "mapping"], "built", 3, None, {1: "x"},
                                   {"x": math.nan}, {"x": "y" * protocol.MAX_FACTS_BYTES},
                                   {"x": object()}])
def test_facts_that_are_not_a_small_mapping_are_dropped(facts: object) -> None:
    assert protocol.side_facts(facts) is None


def test_deeply_nested_facts_are_dropped_not_raised() -> None:
    deep: dict = {}
    for _ in range(100_000):
        deep = {"x": deep}
    assert protocol.side_facts(deep) is None


def test_small_facts_are_kept() -> None:
    facts = {"built": ["kernel.cu"], "seconds": 1.5, "ptx": {"sm": 90}}
    assert protocol.side_facts(facts) == facts
