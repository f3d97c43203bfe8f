"""The torch_compute: forbidden policy: what the static check flags (file and line), what honest
code it accepts (every real solution in the repository), and the run-time verdict on ATen ops."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from aka_core.evaluation.policy import Violation, check_ops, check_sources, describe_violations

REPO = Path(__file__).resolve().parents[2]

# Honest candidates the policy must accept: the solutions of every family, the task folders'
# starting kernels. Globbed, so the test grows with the corpus.
CORPUS = sorted({*REPO.glob("tests/solutions/*/*/*.py"), *REPO.glob("tasks/*/*/kernel.py")})

# Corpus files that break the rule for real, with the (file, line) of each violation: the test
# fails once such a file is fixed, so that this list shrinks with it.
KNOWN_VIOLATIONS = {
    # `return losses.mean()`: the mean over rows is computed by PyTorch, not by a Triton kernel.
    "tests/solutions/torch2triton/cross_entropy/kernel.py": [("kernel.py", 47)],
}


def check(tmp_path: Path, source: str, modules: dict[str, str] | None = None) -> list[Violation]:
    """Check ``source`` as kernel.py in a fresh candidate folder beside ``modules`` (path: text)."""
    for name, text in {"kernel.py": source, **(modules or {})}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return check_sources(tmp_path, ["kernel.py"])


def where(violations: list[Violation]) -> list[tuple[str, int | None]]:
    return [(v.file, v.line) for v in violations]


def case(name: str, source: str, lines: list[int], words: str) -> object:
    """A forbidden ``source``: the lines of kernel.py it is flagged at, words of the first message."""
    return pytest.param(source, lines, words, id=name)


@pytest.mark.parametrize(("source", "expected", "words"), [
    case("torch.nn.functional.gelu", "import torch\n\ndef f(x):\n    return torch.nn.functional.gelu(x)\n",
         [4], "torch.nn.functional.gelu uses PyTorch"),
    case("import torch.nn.functional as F",
         "import torch.nn.functional as F\n\ndef f(x):\n    return F.gelu(x)\n",
         [1, 4], "import of torch.nn.functional is not allowed"),
    case("from torch import tanh", "from torch import tanh\n", [1], "import of torch.tanh is not allowed"),
    case("x.tanh()", "def f(x):\n    return x.tanh()\n", [2], ".tanh(...)"),
    case("x.mul_()", "def f(x):\n    x.mul_(2)\n    return x\n", [2], ".mul_(...)"),
    case("x @ w", "def f(x, w):\n    return x @ w\n", [2], "the @ operator"),
    case("getattr(torch, name)", "import torch\n\ndef f(x):\n    return getattr(torch, 'ge' + 'lu')(x)\n",
         [4, 4], "getattr reaches code"),
    case("__import__", "def f():\n    return __import__('torch')\n", [2], "__import__ reaches code"),
    case("torch.ops.aten.gelu", "import torch\n\ndef f(x):\n    return torch.ops.aten.gelu(x)\n",
         [4], "torch.ops.aten.gelu uses PyTorch"),
    case("x.__class__", "def f(x):\n    return x.__class__\n", [2], "attribute __class__"),
    case("import numpy", "import numpy\n", [1], "import of numpy is not allowed"),
    case("torch as a value", "import torch\n\nT = torch\n", [3], "PyTorch module used as a value"),
    case("torch through triton", "import triton\n\nx = triton.testing.torch.tanh\n", [3],
         "reaches the module torch"),
    case("operator.methodcaller", "import operator\n\nf = operator.methodcaller('tanh')\n", [3],
         "calls methods by name"),
    case("from torch import *", "from torch import *\n", [1], "import * is not allowed"),
    case("torch.cuda.comm", "import torch\n\ns = torch.cuda.comm\n", [3], "torch.cuda.comm uses PyTorch"),
    case("a local jit is no kernel", "def jit(fn):\n    return fn\n\n@jit\ndef f(x):\n    return x.exp()\n",
         [6], ".exp(...)"),
    case("torch inside a kernel",
         "import torch\nimport triton\n\n@triton.jit\ndef k(x):\n    return torch.tanh(x)\n",
         [6], "torch.tanh uses PyTorch"),
    case("syntax error", "def f(x):\n    return x.sum(\n", [2], "syntax error"),
])
def test_forbidden_code_is_flagged_at_its_line(tmp_path: Path, source: str, expected: list[int],
                                               words: str) -> None:
    violations = check(tmp_path, source)

    assert where(violations) == [("kernel.py", line) for line in expected]
    assert words in violations[0].message
    assert str(violations[0]).startswith(f"kernel.py:{expected[0]}: ")


def test_a_violation_in_an_imported_helper_is_reported_in_the_helper(tmp_path: Path) -> None:
    main = """\
        from .helper import f
        import pkg.mod
        from . import other

        def entry(x):
            return f(x)
        """
    helper = """\
        import torch

        def f(x):
            return torch.tanh(x)
        """
    violations = check(tmp_path, main, {"helper.py": helper, "pkg/__init__.py": "",
                                        "pkg/mod.py": "import sys\n", "other.py": "from .helper import f\n"})

    assert where(violations) == [("helper.py", 4), ("pkg/mod.py", 1)]  # helper.py checked once


def test_an_absolute_import_of_a_helper_is_followed(tmp_path: Path) -> None:
    violations = check(tmp_path, "import helper\n", {"helper.py": "x = 1\ny = x.relu()\n"})

    assert where(violations) == [("helper.py", 2)]


def test_a_relative_import_may_not_leave_the_candidate_folder(tmp_path: Path) -> None:
    violations = check(tmp_path, "from .. import secret\n")

    assert where(violations) == [("kernel.py", 1)]


@pytest.mark.parametrize("where_nested", ["kernel.py", "helper.py"])
def test_source_nested_past_the_checks_reach_is_a_violation_not_a_judge_failure(
        tmp_path: Path, where_nested: str) -> None:
    """A sum of 600 terms compiles, but the check's visit recursed past Python's limit: a
    RecursionError in the judge, an infra_error retried in place of the candidate's zero (red
    team: nest_past_the_rules_check). Deeper still, the parse itself raises it (a helper the
    candidate's module imports only when called is read all the same)."""
    deep = "x = " + " + ".join(["1"] * 600) + "\n"
    deeper = "x = " + " + ".join(["1"] * 20000) + "\n"
    source = deep if where_nested == "kernel.py" else "def f():\n    from . import helper\n"
    violations = check(tmp_path, source, {"helper.py": deeper} if where_nested == "helper.py"
                       else None)

    assert [v.file for v in violations] == [where_nested]
    assert "nested deeper" in violations[0].message


@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_source_that_is_a_link_is_a_violation_never_read(tmp_path: Path, link: str) -> None:
    """The judge reads the sources itself, unconfined: a helper that is a link (or lies in a
    linked folder) named any file of the host, which the judge read (a blocking one,
    ``/proc/kmsg``, held it until its phase ran out: an evaluator's fault)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "helper.py").write_text("import torch\ny = torch.tanh\n")
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    if link == "file":
        (candidate / "helper.py").symlink_to(outside / "helper.py")
        source, flagged = "def f():\n    from . import helper\n", "helper.py"
    else:
        (candidate / "pkg").symlink_to(outside)
        source, flagged = "def f():\n    from .pkg import helper\n", "pkg/helper.py"
    violations = check(candidate, source)

    assert [(v.file, "a link" in v.message) for v in violations] == [(flagged, True)]


def test_a_module_shadowing_a_library_is_flagged(tmp_path: Path) -> None:
    violations = check(tmp_path, "import triton\n", {"triton.py": "import torch\n"})

    assert where(violations) == [("kernel.py", 1)]


def test_a_triton_kernel_and_its_host_code_are_accepted(tmp_path: Path) -> None:
    source = """\
        from __future__ import annotations

        import math

        import torch
        import triton
        import triton.language as tl
        from torch import empty, float32


        @triton.autotune(configs=[triton.Config({"BLOCK": 1024})], key=["n"])
        @triton.jit
        def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
            total = tl.sum(tl.exp(x), axis=0) + x.sum(0) + tl.max(x @ x, 0)
            tl.store(y_ptr + offs, (x / total).to(y_ptr.dtype.element_ty), mask=offs < n)


        def run(x: torch.Tensor) -> torch.Tensor:
            x = x.contiguous()
            y = torch.empty_like(x)
            scratch = empty((x.numel(),), dtype=float32, device=x.device)
            n = x.numel()
            rows, cols = x.shape
            flat = x.view(-1)
            stream = torch.cuda.current_stream()
            biggest = torch.finfo(torch.float8_e4m3fn).max
            grid = (triton.cdiv(n, 1024), max(1, min(8, rows)), math.ceil(cols / 2))
            _kernel[grid](flat, y, n, x.stride(0))
            assert isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16, torch.__version__
            return y, scratch, stream, biggest
        """
    assert check(tmp_path, source) == []


def test_a_native_library_may_name_its_functions_like_compute_methods(tmp_path: Path) -> None:
    source = """\
        import torch
        from aka_backend_cuda import load

        _lib = load("kernel.cu", functions=["softmax"])

        def softmax(x):
            y = torch.empty_like(x)
            _lib.softmax(x, y, x.shape[0], x.shape[1])
            return y
        """
    assert check(tmp_path, source) == []


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_honest_candidates_in_the_repository_are_accepted(path: Path) -> None:
    violations = check_sources(path.parent, [path.name])

    assert where(violations) == KNOWN_VIOLATIONS.get(path.relative_to(REPO).as_posix(), []), \
        describe_violations(violations)


def test_the_corpus_is_found() -> None:
    families = {p.relative_to(REPO).parts[2] for p in CORPUS if p.is_relative_to(REPO / "tests")}

    assert {"triton2triton", "torch2triton", "cuda2cuda", "torch2cuda"} <= families


def test_check_ops_returns_the_compute_ops_sorted() -> None:
    assert check_ops({"empty_like", "view", "gelu", "mul"}) == ["gelu", "mul"]
    assert check_ops(["_to_copy", "copy_", "as_strided", "fill_"]) == []


def test_copies_count_as_compute_where_the_task_forbids_torch_copies() -> None:
    """A transpose done by x.t().contiguous() (clone), a cast by .to(dtype) (_to_copy): data
    moved by PyTorch, which torch_copies: forbidden rejects; views and allocation stay allowed."""
    ops = {"t", "clone", "_to_copy", "copy_", "empty_like", "view"}
    assert check_ops(ops) == []
    assert check_ops(ops, copies=True) == ["_to_copy", "clone", "copy_"]
    assert check_ops({"t", "empty", "as_strided"}, copies=True) == []


def test_describe_violations_lists_five_and_counts_the_rest() -> None:
    violations = [Violation(file="kernel.py", line=i, message=f"problem {i}") for i in range(1, 8)]

    message = describe_violations(violations)

    assert "kernel.py:5: problem 5" in message
    assert "problem 6" not in message
    assert message.endswith("; and 2 more.")
    assert "\n" not in message
