"""Compiled Python in a candidate's folder: the rules can only read source, so what runs must be
the source. A side's modules are imported from their ``.py`` files, never from bytecode (an
unchecked-hash ``__pycache__/kernel.cpython-311.pyc`` was run in place of the checked
``kernel.py``), and ``torch_compute: forbidden`` flags every compiled module Python could load
from the folder (a sourceless ``helper.pyc`` was imported unchecked), and a source too large to
read."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import itertools
import marshal
import os
import py_compile
import sys
import textwrap
from pathlib import Path

import pytest

from aka_core.errors import BuildError
from aka_core.evaluation.policy import check_sources
from aka_core.kits.python_backend import PythonBackend

EXTENSION = importlib.machinery.EXTENSION_SUFFIXES[0]  # .cpython-311-x86_64-linux-gnu.so here
_packages = itertools.count()


def folder(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "candidate"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def compiled(path: Path, source: str, *, cfile: Path | None = None,
             mode: py_compile.PycInvalidationMode = py_compile.PycInvalidationMode.UNCHECKED_HASH
             ) -> Path:
    """Bytecode of ``source`` at ``cfile`` (default: where Python caches ``path``'s)."""
    cfile = cfile or Path(importlib.util.cache_from_source(str(path)))
    scratch = path.parent / f".src-{os.getpid()}.py"
    scratch.write_text(textwrap.dedent(source))
    cfile.parent.mkdir(parents=True, exist_ok=True)
    py_compile.compile(str(scratch), cfile=str(cfile), doraise=True, invalidation_mode=mode)
    scratch.unlink()
    return cfile


def load(root: Path, ref: str = "kernel.py:f"):  # type: ignore[no-untyped-def]
    package = f"aka_side_bytecode_test_{next(_packages)}"
    try:
        return PythonBackend().load_callable(root, ref, package)()
    finally:
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            del sys.modules[name]


EVIL = "def f():\n    return 'bytecode'\n"


# -- the runners never run bytecode from a side's folder ----------------------------------------

def test_an_unchecked_hash_pyc_of_the_entry_file_is_not_run(tmp_path: Path) -> None:
    root = folder(tmp_path, {"kernel.py": "def f():\n    return 'source'\n"})
    compiled(root / "kernel.py", EVIL)
    assert load(root) == "source"


def test_a_pyc_forged_with_the_sources_mtime_and_size_is_not_run(tmp_path: Path) -> None:
    root = folder(tmp_path, {"kernel.py": "from .helper import g\n\ndef f():\n    return g()\n",
                             "helper.py": "def g():\n    return 'source'\n"})
    helper = root / "helper.py"
    st = helper.stat()
    code = compile("def g():\n    return 'bytecode'\n", str(helper), "exec")
    header = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
              + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
              + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    pyc = Path(importlib.util.cache_from_source(str(helper)))
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(header + marshal.dumps(code))
    assert load(root) == "source"


def test_a_module_that_is_only_bytecode_does_not_import(tmp_path: Path) -> None:
    root = folder(tmp_path, {"kernel.py": "from .helper import g\n\ndef f():\n    return g()\n"})
    compiled(root / "helper.py", "def g():\n    return 'bytecode'\n", cfile=root / "helper.pyc")
    with pytest.raises(BuildError, match="No module named") as caught:
        load(root)
    assert "helper.pyc is bytecode" in caught.value.message


# -- torch_compute: forbidden flags compiled modules the folder offers --------------------------

def test_a_relative_import_of_a_module_that_is_only_bytecode_is_flagged(tmp_path: Path) -> None:
    # The red team's pyc_bypass/sol: kernel.py is a clean wrapper, helper.pyc calls F.gelu.
    root = folder(tmp_path, {"kernel.py": "import torch\nfrom .helper import gelu_impl\n"})
    compiled(root / "helper.py", "import torch.nn.functional as F\n", cfile=root / "helper.pyc")
    violations = check_sources(root, ["kernel.py"])
    assert [(v.file, v.line) for v in violations] == [("kernel.py", 2)]
    assert "helper.pyc" in violations[0].message and "ship the module's source" in violations[0].message


@pytest.mark.parametrize(("files", "compiled_file", "line"), [
    pytest.param({"kernel.py": "from . import helper\n", "helper.py": "x = 1\n"},
                 f"helper{EXTENSION}", 1, id="an extension module beside its clean source"),
    pytest.param({"kernel.py": "from .pkg import mod\n", "pkg/mod.py": "x = 1\n"},
                 "pkg/__init__.pyc", 1, id="a package whose __init__ is bytecode"),
    pytest.param({"kernel.py": "x = 1\nfrom .pkg.mod import y\n", "pkg/__init__.py": ""},
                 "pkg/mod.abi3.so", 2, id="a submodule that is an extension module"),
])
def test_an_import_that_would_load_compiled_code_is_flagged(tmp_path: Path, files: dict[str, str],
                                                           compiled_file: str, line: int) -> None:
    root = folder(tmp_path, files)
    (root / compiled_file).write_bytes(b"\x7fELF not checked")
    violations = check_sources(root, ["kernel.py"])
    assert [(v.file, v.line) for v in violations] == [("kernel.py", line)]
    assert compiled_file in violations[0].message


def test_compiled_modules_nothing_imports_are_flagged_too(tmp_path: Path) -> None:
    root = folder(tmp_path, {"kernel.py": "x = 1\n"})
    (root / "spare.pyc").write_bytes(b"")
    (root / "sub").mkdir()
    (root / "sub" / f"fast{EXTENSION}").write_bytes(b"")
    violations = check_sources(root, ["kernel.py"])
    assert [(v.file, v.line) for v in violations] == [("spare.pyc", None), (f"sub/fast{EXTENSION}", None)]
    assert "would load in place of any source" in violations[0].message


def test_caches_and_folders_no_import_can_name_are_left_alone(tmp_path: Path) -> None:
    # __pycache__ is never read by a runner; a folder that is no identifier is no package.
    root = folder(tmp_path, {"kernel.py": "def f():\n    return 1\n"})
    compiled(root / "kernel.py", EVIL)
    for rel in (f".venv/lib/python3.11/site-packages/numpy/core{EXTENSION}",
                "build/lib.linux-x86_64-cpython-311/ext.so", "notes.pyc.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"")
    assert check_sources(root, ["kernel.py"]) == []


def test_a_source_too_large_to_read_is_flagged_not_read(tmp_path: Path) -> None:
    # A sparse helper.py of terabytes: the judge read every source whole.
    root = folder(tmp_path, {"kernel.py": "from .helper import g\n"})
    with open(root / "helper.py", "wb") as handle:
        handle.truncate(15 * 2**40)
    violations = check_sources(root, ["kernel.py"])
    assert [(v.file, v.line) for v in violations] == [("helper.py", None)]
    assert "more than this check reads" in violations[0].message
