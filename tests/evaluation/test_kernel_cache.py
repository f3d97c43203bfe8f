"""The store of compiled kernels between evaluations: keyed by origin, verified, bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aka_core.evaluation import kernel_cache
from aka_core.kits import native
from aka_core.run.workspace import remove_tree


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv(kernel_cache.ENV, str(root))
    return root


def side_folder(path: Path, text: str = "def f(x):\n    return x\n") -> Path:
    path.mkdir(parents=True)
    (path / "kernel.py").write_text(text)
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "kernel.cpython-312.pyc").write_bytes(b"\x00" * 16)
    return path


def compiled(folder: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


def test_key_depends_on_content_not_on_where_the_folder_is(tmp_path: Path) -> None:
    a = side_folder(tmp_path / "a")
    b = side_folder(tmp_path / "elsewhere" / "b")
    key = kernel_cache.key("candidate", "t/gelu", "triton", {}, a)
    assert key == kernel_cache.key("candidate", "t/gelu", "triton", {}, b)
    assert key != kernel_cache.key("baseline", "t/gelu", "triton", {}, a)
    assert key != kernel_cache.key("candidate", "t/silu", "triton", {}, a)
    assert key != kernel_cache.key("candidate", "t/gelu", "triton", {"TRITON_X": "1"}, a)
    (b / "kernel.py").write_text("def f(x):\n    return x + 0\n")
    assert key != kernel_cache.key("candidate", "t/gelu", "triton", {}, b)
    (tmp_path / "a" / "link").symlink_to("/etc/hostname")
    assert key != kernel_cache.key("candidate", "t/gelu", "triton", {}, a)


@pytest.mark.parametrize("rel", ["__pycache__/kernel.cpython-312.pyc", ".git/objects/ab/cd",
                                 "__pycache__/planted.pyc"])
def test_every_file_of_the_folder_is_in_the_key(tmp_path: Path, rel: str) -> None:
    # The store returns an entry only to byte-identical files: bytecode or a .git that differs
    # (what could plant files in the side's cache while the .py files stay clean) is a new key.
    a = side_folder(tmp_path / "a")
    clean = kernel_cache.key("candidate", "t/gelu", "triton", {}, a)
    compiled(a, {rel: os.urandom(16)})
    assert kernel_cache.key("candidate", "t/gelu", "triton", {}, a) != clean


def test_an_empty_folder_or_a_special_file_changes_the_key(tmp_path: Path) -> None:
    a = side_folder(tmp_path / "a")
    clean = kernel_cache.key("candidate", "t", "triton", {}, a)
    (a / "pkg").mkdir()  # a namespace package a relative import can now name
    with_folder = kernel_cache.key("candidate", "t", "triton", {}, a)
    os.mkfifo(a / "fifo")
    assert len({clean, with_folder, kernel_cache.key("candidate", "t", "triton", {}, a)}) == 3


def test_names_that_are_not_utf8_have_a_key(tmp_path: Path) -> None:
    # os.walk's names keep undecodable bytes as surrogates, which .encode() refused: the judge
    # failed with UnicodeEncodeError, a retryable infra_error a wrong candidate could hide behind.
    a = side_folder(tmp_path / "a")
    Path(os.fsdecode(os.fsencode(a) + b"/notes-\xff\xfe.txt")).write_text("x")
    os.symlink(b"/nowhere/\xff", os.fsencode(a) + b"/link-\xfe")
    key = kernel_cache.key("candidate", "t", "triton", {}, a)
    assert key is not None and key == kernel_cache.key("candidate", "t", "triton", {}, a)


def test_a_folder_nested_too_deep_has_no_key_and_no_error(tmp_path: Path) -> None:
    a = side_folder(tmp_path / "a")
    deep = a
    for _ in range(1200):  # os.walk recursed once per level: RecursionError near 1000
        deep = deep / "d"
        deep.mkdir()
    try:
        assert kernel_cache.key("candidate", "t", "triton", {}, a) is None
    finally:
        remove_tree(a / "d")  # pytest's own clean-up recurses too


def test_a_folder_that_cannot_be_read_has_no_key(tmp_path: Path) -> None:
    a = side_folder(tmp_path / "a")
    (a / "secret").write_text("x")
    (a / "secret").chmod(0)
    try:
        if os.access(a / "secret", os.R_OK):
            pytest.skip("root reads any file")
        assert kernel_cache.key("candidate", "t", "triton", {}, a) is None
    finally:
        (a / "secret").chmod(0o600)


@pytest.mark.parametrize("swap", ["grown", "link", "fifo_with_a_writer", "folder"])
def test_a_file_swapped_after_the_walk_saw_it_has_no_key_and_no_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str) -> None:
    # The walk sized the empty __init__.py; the candidate's processes may change it before it is
    # read. A FIFO with a writer holding it open made the read return None: a TypeError (the
    # judge's failure), not a cold cache.
    a = side_folder(tmp_path / "a")
    target, held = a / "__init__.py", []
    target.write_bytes(b"")
    real_walk = kernel_cache.walk

    def walk_then_swap(root: Path, **kwargs: object) -> object:
        tree = real_walk(root, **kwargs)
        if swap == "grown":
            target.write_text("def f(x):\n    return x + 1\n")
            return tree
        target.unlink()
        if swap == "link":
            target.symlink_to(tmp_path / "elsewhere.py")
            (tmp_path / "elsewhere.py").write_text("def f(x):\n    return x\n")
        elif swap == "folder":
            target.mkdir()
        else:
            os.mkfifo(target)
            held.append(os.open(target, os.O_RDONLY | os.O_NONBLOCK))
            held.append(os.open(target, os.O_WRONLY))
        return tree

    monkeypatch.setattr(kernel_cache, "walk", walk_then_swap)
    try:
        assert kernel_cache.key("candidate", "t", "triton", {}, a) is None
    finally:
        for fd in held:
            os.close(fd)


def test_a_folder_too_large_to_hash_has_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    folder = side_folder(tmp_path / "big")
    monkeypatch.setattr(kernel_cache, "SIDE_LIMIT_BYTES", 10)
    assert kernel_cache.key("candidate", "t", "triton", {}, folder) is None


def test_saved_kernels_return_to_the_same_key_only(store: Path, tmp_path: Path) -> None:
    first = compiled(tmp_path / "run1", {"triton/abc/k.cubin": b"\x7fELF cubin",
                                          "builds/cuda/key/lib.so": b"so"})
    miss = kernel_cache.restore("k1", tmp_path / "fresh0")
    assert miss == {"used": False, "reason": "miss"}
    saved = kernel_cache.save("k1", first, miss)
    assert saved["saved"] and saved["files"] == 2
    restored = kernel_cache.restore("k1", tmp_path / "run2")
    assert restored["used"] and restored["files"] == 2
    assert (tmp_path / "run2" / "triton" / "abc" / "k.cubin").read_bytes() == b"\x7fELF cubin"
    assert not kernel_cache.restore("k2", tmp_path / "run3")["used"]
    assert not (tmp_path / "run3").exists()
    # Nothing new: the entry is not rewritten.
    assert kernel_cache.save("k1", tmp_path / "run2", restored) == {"saved": False,
                                                                    "reason": "nothing new"}


def test_links_and_special_files_are_not_kept(store: Path, tmp_path: Path) -> None:
    run = compiled(tmp_path / "run", {"triton/k.cubin": b"ok"})
    (run / "triton" / "passwd").symlink_to("/etc/passwd")
    (run / "dirlink").symlink_to("/etc")
    os.mkfifo(run / "fifo")
    assert kernel_cache.save("k", run, {"used": False})["files"] == 1
    kernel_cache.restore("k", tmp_path / "back")
    assert sorted(p.relative_to(tmp_path / "back").as_posix()
                  for p in (tmp_path / "back").rglob("*")) == ["triton", "triton/k.cubin"]


def test_an_entry_over_the_limit_is_not_kept(store: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_cache, "ENTRY_LIMIT_BYTES", 100)
    run = compiled(tmp_path / "run", {"a": b"x" * 80, "b": b"y" * 80})
    assert kernel_cache.save("k", run, {"used": False})["saved"] is False
    assert not (store / "k").exists()


def test_an_entry_changed_behind_its_manifest_is_discarded(store: Path, tmp_path: Path) -> None:
    kernel_cache.save("k", compiled(tmp_path / "run", {"triton/k.cubin": b"good"}), {})
    (store / "k" / "files" / "triton" / "k.cubin").write_bytes(b"poisoned")
    restored = kernel_cache.restore("k", tmp_path / "next")
    assert restored["used"] is False and "differ" in restored["reason"]
    assert not any((tmp_path / "next").iterdir()) and not (store / "k").exists()
    # A file added behind the manifest's back, or a manifest lost: the same.
    kernel_cache.save("k", compiled(tmp_path / "run2", {"triton/k.cubin": b"good"}), {})
    (store / "k" / "files" / "extra.py").write_text("import os")
    assert kernel_cache.restore("k", tmp_path / "next2")["used"] is False
    kernel_cache.save("k", compiled(tmp_path / "run3", {"triton/k.cubin": b"good"}), {})
    (store / "k" / kernel_cache.INFO).write_text(json.dumps({"files": 1}))
    assert kernel_cache.restore("k", tmp_path / "next3")["used"] is False


def test_the_store_is_trimmed_least_recently_used_first(store: Path, tmp_path: Path) -> None:
    for i, name in enumerate(("old", "mid", "new")):
        kernel_cache.save(name, compiled(tmp_path / name, {"f": b"z" * 100}), {})
        os.utime(store / name, (1000 + i, 1000 + i))
    (store / ".new-leftover").mkdir()
    os.utime(store / ".new-leftover", (1, 1))
    assert kernel_cache.trim(store, limit=250) == 1
    assert sorted(p.name for p in store.iterdir()) == ["mid", "new"]


def test_off_means_a_cold_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kernel_cache.ENV, "off")
    assert kernel_cache.store() is None
    assert kernel_cache.restore("k", tmp_path / "x") == {"used": False, "reason": "off"}
    assert kernel_cache.save("k", tmp_path, {}) == {"saved": False}


def test_native_build_key_ignores_the_sources_folder(tmp_path: Path) -> None:
    keys = []
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "k.cu").write_text("__global__ void k() {}\n")
        (folder / "k.cuh").write_text("#pragma once\n")
        source = folder / "k.cu"
        keys.append(native.content_key("nvcc 13", [["nvcc", "-o", "{out}/lib.so", str(source)]],
                                       [source]))
    assert keys[0] == keys[1]
    (tmp_path / "two" / "k.cuh").write_text("#define X 1\n")
    assert keys[0] != native.content_key(
        "nvcc 13", [["nvcc", "-o", "{out}/lib.so", str(tmp_path / "two" / "k.cu")]],
        [tmp_path / "two" / "k.cu"])


def triton_group(cache: Path, monkeypatch: pytest.MonkeyPatch, write: bool = False
                 ) -> dict[str, str] | None:
    """Triton's own cache manager on ``cache``: writes one compiled kernel's files and their
    group (as a compile does), or looks the group up (as the next compile does)."""
    cache_module = pytest.importorskip("triton.runtime.cache")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache / "triton"))
    manager = cache_module.FileCacheManager("KEYOFAKERNEL")
    if write:
        children = {"k.cubin": manager.put(b"\x7fELF", "k.cubin"),
                    "k.json": manager.put("{}", "k.json", binary=False)}
        manager.put_group("k.json", children)
    return manager.get_group("k.json")


def test_triton_finds_its_kernels_in_a_cache_restored_to_another_folder(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = tmp_path / "evaluation1" / "cache"
    assert len(triton_group(first, monkeypatch, write=True) or {}) == 2
    kernel_cache.save("k", first, {"used": False})
    stored = (store / "k" / "files" / "triton" / "KEYOFAKERNEL" / "__grp__k.json").read_text()
    assert str(first) not in stored and kernel_cache.GROUP_ROOT in stored
    second = tmp_path / "evaluation2" / "cache"
    restored = kernel_cache.restore("k", second)
    assert restored["used"]
    found = triton_group(second, monkeypatch)
    assert found == {"k.cubin": str(second / "triton" / "KEYOFAKERNEL" / "k.cubin"),
                     "k.json": str(second / "triton" / "KEYOFAKERNEL" / "k.json")}
    # The runner compiled nothing new: the entry is not rewritten.
    assert kernel_cache.save("k", second, restored)["reason"] == "nothing new"


def test_a_group_naming_paths_elsewhere_is_kept_as_it_is(store: Path, tmp_path: Path) -> None:
    group = {"child_paths": {"a": "/etc/passwd", "b": f"{tmp_path}/run/../../x"}}
    run = compiled(tmp_path / "run", {"triton/K/__grp__a.json": json.dumps(group).encode()})
    kernel_cache.save("k", run, {"used": False})
    kernel_cache.restore("k", tmp_path / "back")
    back = json.loads((tmp_path / "back" / "triton" / "K" / "__grp__a.json").read_text())
    assert back["child_paths"]["a"] == "/etc/passwd"
    assert back["child_paths"]["b"] == f"{tmp_path}/run/../../x"  # climbs out: not moved


def test_the_drivers_utilities_are_never_kept_nor_restored(store: Path, tmp_path: Path) -> None:
    """Triton's driver loads its utilities (a shared library in the cache) when the runner's
    trusted preload starts it, before the judge holds the GPU: one a candidate put there would
    run, in its next evaluation, outside the lock and before its side is judged."""
    so = "cuda_utils.cpython-312-x86_64-linux-gnu.so"
    run = compiled(tmp_path / "run", {"triton/abc/k.cubin": b"ok", f"triton/def/{so}": b"\x7fELF",
                                      "triton/ghi/hip_utils.so": b"\x7fELF"})
    assert kernel_cache.save("k", run, {"used": False})["files"] == 1
    restored = kernel_cache.restore("k", tmp_path / "back")
    assert restored["used"] and restored["files"] == 1
    assert [p.name for p in (tmp_path / "back").rglob("*") if p.is_file()] == ["k.cubin"]
    # An entry kept before they were left out (manifest and all) is discarded, not restored.
    entry = store / "k"
    (entry / "files" / "triton" / "def").mkdir()
    (entry / "files" / "triton" / "def" / so).write_bytes(b"\x7fELF")
    info = json.loads((entry / kernel_cache.INFO).read_text())
    info["digests"][f"triton/def/{so}"] = kernel_cache.digest(entry / "files" / "triton" / "def" / so)
    (entry / kernel_cache.INFO).write_text(json.dumps(info))
    again = kernel_cache.restore("k", tmp_path / "again")
    assert again["used"] is False and "utilities" in again["reason"]
    assert not any((tmp_path / "again").rglob(so)) and not entry.exists()


def test_a_group_file_nested_past_the_interpreters_depth_is_left_as_it_is() -> None:
    # A side's Triton cache is its own to write: a group file nested deeper than the parser
    # goes must not end a later evaluation's restore in a RecursionError (an infra_error).
    for nested in (b"[" * 200_000 + b"]" * 200_000,
                   b'{"child_paths": {}, "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"):
        assert kernel_cache._group_paths(nested, "/a", "/b") == nested
    moved = kernel_cache._group_paths(b'{"child_paths": {"k": "/a/k.json"}}', "/a", "/b")
    assert json.loads(moved) == {"child_paths": {"k": "/b/k.json"}}
