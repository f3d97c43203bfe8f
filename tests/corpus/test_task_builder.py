"""``aka task new --from-reference``: a reference function becomes a task that validates, and a
reference it cannot handle gets an error naming the file, the line and what to write."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from aka_core.yamlio import load_plain_yaml

Aka = Callable[..., tuple[int, str, str]]

RMS_NORM = '''\
"""A reference written by the test."""

import torch


def rms_norm_reference(x, weight, eps=1e-6):
    """RMSNorm over the last dimension, in float32.

    Shapes:
        x: [M, N]
        weight: [N]
    Sizes: M=4096, N=8192
    Flops: 4 * M * N
    """
    xf = x.float()
    return xf * torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps) * weight.float()
'''


@pytest.fixture
def aka(aka_cli: Aka) -> Aka:
    """``aka(*args) -> (exit status, stdout, stderr)``, in-process (``aka_cli``)."""
    return aka_cli


def write_reference(tmp_path: Path, text: str, name: str = "ref.py") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow  # validate --run: the probe and the trivial candidates
def test_drafted_torch_task_passes_validation_on_cpu(aka: Aka, tmp_path: Path) -> None:
    ref = write_reference(tmp_path, RMS_NORM)
    out_dir = tmp_path / "tasks" / "torch2torch" / "rms_norm"

    code, out, err = aka("task", "new", "--from-reference", ref, "--backend", "torch",
                         "--out", out_dir)

    assert code == 0, err
    assert out.strip() == str(out_dir)
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "inputs.py", "kernel.py", "reference.py", "task.yaml"]
    data = load_plain_yaml(out_dir / "task.yaml")
    assert data["cases"] == [{"name": "m4096_n8192_bf16",
                              "params": {"M": 4096, "N": 8192, "dtype": "bfloat16"}}]
    drawn = data["held_out_draws"]["params"]
    assert drawn["M"]["range"][0] < 4096 < drawn["M"]["range"][1]
    assert all(v % 2 for v in [*drawn["M"]["range"], *drawn["N"]["range"]])  # odd corners
    assert data["smoke_case"]["params"] == {"M": 37, "N": 1009, "dtype": "bfloat16"}
    assert data["cost"] == {"bytes": "M * N * bytes_of(dtype) + N * bytes_of(dtype) + "
                                     "M * N * bytes_of(dtype)", "flops": "4 * M * N"}

    code, out, _ = aka("validate", out_dir)
    assert code == 0 and out.splitlines()[0].split() == ["PASS", "torch2torch/rms_norm"], out

    report = tmp_path / "report.json"
    code, out, _ = aka("validate", out_dir, "--run", "--device", "cpu", "--report", report)
    assert code == 0 and out.splitlines()[0].split() == ["PASS", "torch2torch/rms_norm"], out
    checks = {c["name"]: c for c in json.loads(report.read_text())["reports"][0]["checks"]}
    assert checks["baseline_matches_reference"]["status"] == "PASS"
    assert checks["trivial_candidate[zeros]"]["status"] == "PASS"
    assert "outside atol" in checks["trivial_candidate[zeros]"]["detail"]
    assert checks["tolerance_calibration"]["status"] == "PASS"


def test_drafted_triton_task_has_the_torch2triton_layout(aka: Aka, tmp_path: Path) -> None:
    ref = write_reference(tmp_path, RMS_NORM)
    out_dir = tmp_path / "tasks" / "torch2triton" / "rms_norm"

    code, _, err = aka("task", "new", "--from-reference", ref, "--out", out_dir,
                       "--example-shapes", "weight: [N] float32", "--sizes", "M=1024")

    assert code == 0, err
    data = load_plain_yaml(out_dir / "task.yaml")
    assert (data["backend"], data["family"]) == ("triton", "torch2triton")
    assert data["baseline"] == "baseline.py:rms_norm" and data["entrypoint"] == "kernel.py:rms_norm"
    assert data["rules"] == {"torch_compute": "forbidden", "compute_precision": "float32"}
    assert data["cases"][0]["params"] == {"M": 1024, "N": 8192, "dtype": "bfloat16"}
    assert "N * 4" in data["cost"]["bytes"]  # the float32 weight, from --example-shapes
    assert "raise NotImplementedError" in (out_dir / "kernel.py").read_text()
    assert "Triton" in data["instructions"]
    code, out, _ = aka("validate", out_dir)
    assert code == 0 and out.startswith("PASS"), out


@pytest.mark.slow
def test_drafted_triton_task_rejects_torch_compute_on_cpu(aka: Aka, tmp_path: Path) -> None:
    pytest.importorskip("triton")
    ref = write_reference(tmp_path, RMS_NORM)
    out_dir = tmp_path / "tasks" / "torch2triton" / "rms_norm"
    assert aka("task", "new", "--from-reference", ref, "--out", out_dir)[0] == 0

    code, out, _ = aka("validate", out_dir, "--run", "--device", "cpu")

    assert code == 0 and out.startswith("PASS"), out
    assert "PASS  trivial_candidate[calls_reference]: rejected by the torch_compute rule" in out
    assert "PASS  trivial_candidate[torch_ops_inline]: rejected by the torch_compute rule" in out


BAD_REFERENCES = {
    "no shape": ('import torch\n\n\ndef f_reference(x, w):\n    """No Shapes section."""\n'
                 "    return x * w\n", "ref.py:4", "parameter 'x' of f_reference() has no shape"),
    "two functions": ("def f(x):\n    return x\n\n\ndef g(x):\n    return x\n",
                      "ref.py:5", "pass --function NAME"),
    "varargs": ("def f(*xs):\n    return xs[0]\n", "ref.py:1", "*args"),
    "integer without bound": ('def f(ids):\n    """Shapes:\n        ids: [T] int64\n    """\n'
                              "    return ids\n", "ref.py:3", "< BOUND"),
    "bad dimension": ('def f(x):\n    """Shapes:\n        x: [M, 2.5]\n    """\n    return x\n',
                      "ref.py:3", "dimension '2.5'"),
    "syntax error": ("def f(x:\n    return x\n", "ref.py:1", "syntax error"),
    "name clash": ('def f(x, N):\n    """Shapes:\n        x: [N]\n        N: 3\n    """\n'
                   "    return x * N\n", "ref.py:1", "parameter 'N' of f() is also a shape's symbol"),
    "raises on its inputs": (
        'def f(x, w):\n    """Shapes:\n        x: [M, K]\n        w: [N, K]\n    """\n'
        "    return x @ w\n", "ref.py:6", "the reference raised RuntimeError"),
}


@pytest.mark.parametrize("case", sorted(BAD_REFERENCES))
def test_reference_it_cannot_handle_gets_file_line_and_what_to_do(
    aka: Aka, tmp_path: Path, case: str
) -> None:
    text, where, message = BAD_REFERENCES[case]
    ref = write_reference(tmp_path, text)

    code, out, err = aka("task", "new", "--from-reference", ref, "--out", tmp_path / "t")

    assert code == 2, (out, err)
    assert f"{tmp_path / where}" in err and message in err, err
    assert not (tmp_path / "t").exists()


def test_task_new_refuses_a_folder_that_is_not_empty(aka: Aka, tmp_path: Path) -> None:
    ref = write_reference(tmp_path, RMS_NORM)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "keep.txt").write_text("mine")

    code, _, err = aka("task", "new", "--from-reference", ref, "--out", tmp_path / "t")

    assert code == 2 and "already exists and is not empty" in err
    assert (tmp_path / "t" / "keep.txt").read_text() == "mine"
