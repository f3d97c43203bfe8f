"""The operator recorder the candidate's first call of each case runs under."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")


def test_the_recorder_records_ops_without_importing_dynamo() -> None:
    # A TorchDispatchMode's handler is wrapped by torch._disable_dynamo by default, and the first
    # call then imports torch._dynamo: 2-3 s of the candidate's first recorded call. A fresh
    # process shows whether that import happens.
    code = textwrap.dedent("""
        import json, sys
        import torch
        from aka_core.evaluation.runner import _OpRecorder
        ops = set()
        x = torch.randn(8)
        with _OpRecorder(ops):
            torch.nn.functional.gelu(torch.empty_like(x).copy_(x * 2))
        print(json.dumps({"ops": sorted(ops),
                          "dynamo": any(m.startswith("torch._dynamo") for m in sys.modules)}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    import json

    found = json.loads(out.strip().splitlines()[-1])
    assert {"gelu", "empty_like", "copy_", "mul"} <= set(found["ops"])
    assert found["dynamo"] is False
