"""The evaluator's digests: a file's digest is reused only while nothing could have written it
(its inode, size, mtime and a ctime no one but root can set back), so a change is seen even where
the writer restores the size and the mtime."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import marshal
import os
import py_compile
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aka_core.evaluation import integrity


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(integrity, "SETTLED_SECONDS", -1.0)  # digests reused at once
    monkeypatch.setattr(integrity, "_DIGESTS", {})


def test_a_rewrite_that_keeps_size_and_mtime_is_seen(tmp_path: Path, settled: None) -> None:
    hook = tmp_path / "judge.py"
    hook.write_text("GOOD = 1\n")
    before = integrity.snapshot([hook])
    st = os.stat(hook)
    time.sleep(0.05)
    hook.write_text("EVIL = 1\n")  # same size
    os.utime(hook, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime moves on
    assert integrity.changes(before, integrity.snapshot([hook])) == [str(hook)]


def test_a_file_replaced_by_a_rename_is_seen(tmp_path: Path, settled: None) -> None:
    hook = tmp_path / "judge.py"
    hook.write_text("GOOD = 1\n")
    before = integrity.snapshot([hook])
    other = tmp_path / "other.py"
    other.write_text("EVIL = 1\n")
    os.replace(other, hook)
    assert integrity.changes(before, integrity.snapshot([hook])) == [str(hook)]


def test_a_file_written_just_now_is_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    monkeypatch.setattr(integrity, "_DIGESTS", {})
    hook = tmp_path / "judge.py"
    hook.write_text("GOOD = 1\n")
    integrity.snapshot([hook])
    assert str(hook) not in integrity._DIGESTS  # its ctime is within the clock's resolution


def test_the_aka_distributions_are_the_ones_importlib_lists() -> None:
    slow = {d.metadata["Name"].lower() for d in importlib.metadata.distributions()
            if (d.metadata["Name"] or "").lower().startswith("aka-")}
    fast = {d.metadata["Name"].lower() for d in integrity.aka_distributions()}
    assert fast == slow and "aka-core" in fast


# -- bytecode: the judge imports aka's __pycache__, so what is there must be the source's --------

GOOD = "def compare(a, b):\n    return a == b\n"
NOT_ITS_SOURCES = "bytecode that is not its source's"
EVIL = "def compare(a, b):\n    return True\n"


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled: None) -> Path:
    """A package folder standing for aka's: one module, ``checking.py``."""
    folder = tmp_path / "aka_fake"
    folder.mkdir()
    (folder / "checking.py").write_text(GOOD)
    monkeypatch.setattr(integrity, "package_folders", lambda: {folder})
    monkeypatch.setattr(integrity, "_VERDICTS", {}, raising=False)
    return folder


def compiled(source: Path, text: str, mode: py_compile.PycInvalidationMode,
             cfile: Path | None = None, optimize: int = -1) -> Path:
    """Bytecode of ``text`` where Python looks for ``source``'s (or at ``cfile``)."""
    cfile = cfile or Path(importlib.util.cache_from_source(str(source)))
    scratch = source.with_name(f".scratch-{os.getpid()}.py")
    scratch.write_text(text)
    py_compile.compile(str(scratch), cfile=str(cfile), doraise=True, invalidation_mode=mode,
                       optimize=optimize)
    scratch.unlink()
    return cfile


def test_an_unchecked_hash_pyc_that_is_not_its_source_is_named(package: Path) -> None:
    # The red team's evalpyc: the judge ran checking.cpython-311.pyc, an unchecked-hash pyc
    # of a compare that passes everything, and the record said evaluator_integrity.unchanged.
    before = integrity.snapshot()
    pyc = compiled(package / "checking.py", EVIL, py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert integrity.changes(before) == [f"{pyc} ({NOT_ITS_SOURCES})"]


def test_a_bad_pyc_there_when_the_run_started_is_named_at_every_check(package: Path) -> None:
    pyc = compiled(package / "checking.py", EVIL, py_compile.PycInvalidationMode.UNCHECKED_HASH)
    before = integrity.snapshot()
    assert integrity.changes(before) == [f"{pyc} ({NOT_ITS_SOURCES})"]
    assert integrity.changes(before) == [f"{pyc} ({NOT_ITS_SOURCES})"]  # verdict reused


def test_a_timestamp_pyc_forged_with_the_sources_mtime_and_size_is_named(package: Path) -> None:
    source = package / "checking.py"
    before = integrity.snapshot()
    st = source.stat()
    header = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
              + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
              + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    pyc = Path(importlib.util.cache_from_source(str(source)))
    pyc.parent.mkdir()
    pyc.write_bytes(header + marshal.dumps(compile(EVIL, str(source), "exec")))
    assert integrity.changes(before) == [f"{pyc} ({NOT_ITS_SOURCES})"]


@pytest.mark.parametrize("mode", list(py_compile.PycInvalidationMode))
@pytest.mark.parametrize("optimize", [-1, 1])
def test_bytecode_python_writes_for_the_source_is_no_change(package: Path, mode: Any,
                                                             optimize: int) -> None:
    before = integrity.snapshot()
    source = package / "checking.py"
    cfile = Path(importlib.util.cache_from_source(str(source),
                                                  optimization="" if optimize < 1 else optimize))
    py_compile.compile(str(source), cfile=str(cfile), doraise=True, invalidation_mode=mode,
                       optimize=optimize)
    assert integrity.changes(before) == []


@pytest.mark.parametrize("mode", [py_compile.PycInvalidationMode.TIMESTAMP,
                                  py_compile.PycInvalidationMode.CHECKED_HASH])
def test_stale_bytecode_python_would_not_use_is_no_change(package: Path, mode: Any) -> None:
    # Another source's bytecode, under headers Python checks against this source and refuses.
    before = integrity.snapshot()
    compiled(package / "checking.py", EVIL + "# longer than the source\n", mode)
    assert integrity.changes(before) == []


def test_compiled_modules_that_shadow_or_replace_a_source_are_named(package: Path) -> None:
    shadow = package / f"checking{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    shadow.write_bytes(b"\x7fELF")  # imported in place of checking.py
    sourceless = compiled(package / "checking.py", EVIL, py_compile.PycInvalidationMode.TIMESTAMP,
                          cfile=package / "policy.pyc")  # imported as aka_fake.policy
    before = integrity.snapshot()
    assert integrity.changes(before) == [
        f"{shadow} (an extension module imported in place of its source)",
        f"{sourceless} (bytecode imported as a module that has no source)"]


def test_startup_hooks_are_checked_in_every_form(tmp_path: Path, package: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("X = 1\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    before = integrity.snapshot()
    pyc = compiled(site / "sitecustomize.py", "import os\n",
                   py_compile.PycInvalidationMode.UNCHECKED_HASH)
    (site / "usercustomize").mkdir()
    (site / "usercustomize" / "__init__.py").write_text("import os\n")
    assert integrity.changes(before) == [f"{pyc} ({NOT_ITS_SOURCES})",
                                         str(site / "usercustomize" / "__init__.py")]
