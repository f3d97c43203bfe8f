"""The bit-exact quick pass: an output equal to its reference meets an exact tolerance with one
``torch.equal``; anything else is decided as before (and a failure is always explained)."""

from __future__ import annotations

import re

import pytest
import torch

from aka_core.evaluation import checking, fused_compare
from aka_core.models import Tolerance

EXACT = Tolerance(rtol=0.0, atol=0.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.int64])
def test_an_equal_output_passes_with_one_equality(dtype: torch.dtype) -> None:
    ref = (torch.randn(4097) * 100).to(dtype)
    before = fused_compare.counts["equal"]
    result = checking.compare(ref.clone(), ref, EXACT)
    assert result["passed"] and result["rel_l2"] == 0.0 and result["elements"] == 4097
    assert fused_compare.counts["equal"] == before + 1
    assert result == checking.exact_compare(ref.clone(), ref, EXACT) | {"passed": True}


def test_one_different_element_fails_with_the_exact_reason() -> None:
    ref = torch.randn(1000).to(torch.bfloat16)
    out = ref.clone()
    out[999] = out[999] * 2 + 1
    before = fused_compare.counts["equal"]
    result = checking.compare(out, ref, EXACT)
    assert not result["passed"] and "1 of 1000 elements" in result["reason"]
    assert fused_compare.counts["equal"] == before


def test_nan_where_the_reference_has_nan_still_passes_by_the_old_path() -> None:
    ref = torch.randn(100)
    ref[7] = float("nan")
    result = checking.compare(ref.clone(), ref, EXACT)
    assert result["passed"]


def test_signed_zeros_and_other_dtypes_are_not_shortcut_wrongly() -> None:
    zeros = torch.zeros(10)
    assert checking.compare(-zeros, zeros, EXACT)["passed"]  # -0.0 == 0.0, as in float64
    # A float32 reference of a bfloat16 output: not the same dtype, the usual pass decides.
    ref = torch.randn(64)
    out = ref.to(torch.bfloat16)
    assert checking.compare(out, ref, EXACT) == checking.exact_compare(out, ref, EXACT)
    # A tolerance with any slack is never the equality's.
    loose = Tolerance(rtol=0.0, atol=1e-3)
    before = fused_compare.counts["equal"]
    assert checking.compare(ref.clone(), ref, loose)["passed"]
    assert fused_compare.counts["equal"] == before


@pytest.mark.parametrize(("base", "dtype"), [(2**24, torch.int64), (2**24, torch.int32),
                                             (2**60, torch.int64)])
def test_integers_differing_by_one_fail_beyond_floats_digits(base: int, dtype: torch.dtype) -> None:
    # float32 holds integers exactly below 2**24, float64 below 2**53: integers compare as integers.
    ref = (torch.arange(1000, dtype=torch.int64) + base).to(dtype)
    out = ref.clone()
    out[::2] += 1
    result = checking.compare(out, ref, EXACT)
    assert not result["passed"] and result["mismatched"] == 500
    got, expected = map(int, re.search(r"got (\d+), expected (\d+)", result["reason"]).groups())
    assert got == expected + 1 and expected >= base  # written as integers, not rounded floats
    assert bool(checking.failure_flag(out, ref, EXACT))
    assert checking.compare(ref.clone(), ref, EXACT)["passed"]
    assert not bool(checking.failure_flag(ref.clone(), ref, EXACT))


def test_a_float64_output_keeps_its_digits() -> None:
    ref = torch.rand(100, dtype=torch.float64) + 1
    out = ref + 1e-9  # equal in float32
    result = checking.exact_compare(out, ref, EXACT)
    assert not result["passed"] and result["mismatched"] == 100
    assert checking.compare(out, ref, Tolerance(rtol=0.0, atol=2e-9))["passed"]
