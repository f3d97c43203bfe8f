"""Outputs and references the comparison kernels' tests share (``test_fused_compare``,
``test_audit_flag``): for one size and pair of dtypes, an output close to its reference, one with
an element far off, and ones with NaN and infinities in their last element, where the reference
has them or not. Imported by those tests' scripts, which run in a process of their own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# (name, the output's last element, the reference's last element); None: left as it is.
SPECIALS = (("nan out", float("nan"), None), ("nan ref", None, float("nan")),
            ("nan both", float("nan"), float("nan")), ("inf out", float("inf"), None),
            ("inf both", float("inf"), float("inf")), ("inf signs", float("-inf"), float("inf")))


def pairs(gen: Any, n: int, out_dtype: Any, ref_dtype: Any, noise: float
          ) -> Iterator[tuple[str, Any, Any]]:
    """``(name, out, ref)``: "close" (``noise`` times a normal draw off), "one far" (its middle
    element 1.0 further), then ``SPECIALS`` on the close output where ``n > 2``."""
    import torch

    ref = torch.randn(n, generator=gen).to(ref_dtype)
    out = (ref.double() + noise * torch.randn(n, generator=gen, dtype=torch.float64)
           ).to(out_dtype)
    yield "close", out, ref
    far = out.clone()
    far[n // 2] = far[n // 2].double() + 1.0
    yield "one far", far, ref
    if n > 2:
        for name, o_val, r_val in SPECIALS:
            o, r = out.clone(), ref.clone()
            if o_val is not None:
                o[n - 1] = o_val
            if r_val is not None:
                r[n - 1] = r_val
            yield name, o, r
