"""The builtin ``python`` backend: loads Python/PyTorch callables; the base of compiled backends.

Each side of an evaluation (reference, baseline, candidate) is loaded as modules of its own
private package (``aka_side_candidate`` ...), so two folders that both hold ``kernel.py`` never
collide and relative imports between a candidate's files work.

A side's modules run from their source, never from bytecode: Python would otherwise take
``__pycache__/kernel.cpython-311.pyc`` (an unchecked-hash pyc is used whatever the source says)
or a sourceless ``helper.pyc`` in place of the ``.py`` the task's rules were checked on. Every
folder below a side's root is imported by a finder that knows only source and extension modules
(``_SourceOnlyLoader``); the static policy flags the extension modules and stray bytecode.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import traceback
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aka_core.errors import BuildError
from aka_core.models import DeviceInfo
from aka_core.plugin.records import BackendReadiness


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the module's source at every import: no ``__pycache__`` is read or written."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


_SOURCE_ONLY_ROOTS: set[str] = set()
"""Folders (and everything below them) imported by ``_source_only_finder``: the sides' roots."""


def _source_only_finder(path: str) -> importlib.machinery.FileFinder:
    """The path hook of a side's folders: source and extension modules, no bytecode."""
    if not any(path == root or path.startswith(root + os.sep) for root in _SOURCE_ONLY_ROOTS):
        raise ImportError("not a side's folder")  # the next hook's
    return importlib.machinery.FileFinder(
        path, (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES))


def import_from_source_only(root: Path) -> None:
    """Make every later import below ``root`` read source (or extension modules), never
    bytecode: finders made earlier for these folders are dropped."""
    folder = str(root)
    if folder not in _SOURCE_ONLY_ROOTS:
        _SOURCE_ONLY_ROOTS.add(folder)
        for cached in list(sys.path_importer_cache):
            if cached == folder or cached.startswith(folder + os.sep):
                del sys.path_importer_cache[cached]
    if _source_only_finder not in sys.path_hooks:
        sys.path_hooks.insert(0, _source_only_finder)


def _ensure_package(package: str, root: Path) -> None:
    existing = sys.modules.get(package)
    if existing is not None:
        if list(getattr(existing, "__path__", [])) != [str(root)]:
            raise BuildError(f"package {package!r} is already loaded from another folder")
        return
    module = types.ModuleType(package)
    module.__path__ = [str(root)]
    module.__spec__ = importlib.machinery.ModuleSpec(package, None, is_package=True)
    module.__spec__.submodule_search_locations = [str(root)]
    sys.modules[package] = module


def _bytecode_hint(exc: BaseException, package: str, root: Path) -> str:
    """What to do when a missing module of the side is there as bytecode only."""
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not name or not name.startswith(package + "."):
        return ""
    module = root.joinpath(*name[len(package) + 1:].split("."))
    compiled = [p for p in (module.with_name(module.name + ".pyc"), module / "__init__.pyc")
                if p.is_file()]
    if not compiled:
        return ""
    rel = compiled[0].relative_to(root).as_posix()
    return (f" ({rel} is bytecode, and a side's modules are imported from their source only: "
            "ship the module's .py file)")


def innermost_location(exc: BaseException, root: Path) -> tuple[str | None, int | None]:
    """The deepest traceback frame inside ``root``: where in the candidate's files it failed."""
    if isinstance(exc, SyntaxError) and exc.filename:
        path = Path(exc.filename)
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        return str(rel), exc.lineno
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        if path.is_relative_to(root):
            found = (str(path.relative_to(root)), frame.lineno)
    return found


class PythonBackend:
    """Loads ``file.py:function`` from a folder; no compile step beyond import."""

    name = "python"

    def worker_environment(self, device: str) -> dict[str, str]:
        return {}

    def preload(self, device: str) -> None:
        """Import, in the runner, what every side of this backend will import (its compiler or
        DSL), before the evaluation holds the GPU. Runs after confinement and before any side's
        code; must not put work on the GPU. Optional: the runner skips backends without it."""

    def describe_device(self, device: str) -> DeviceInfo:
        import torch

        software = {"torch": torch.__version__}
        if device == "cpu" or not torch.cuda.is_available():
            return DeviceInfo(kind="cpu", name="cpu", software=software)
        props = torch.cuda.get_device_properties(0)
        is_hip = getattr(torch.version, "hip", None) is not None
        if is_hip:
            arch = getattr(props, "gcnArchName", "").split(":")[0] or None
            software["hip"] = str(torch.version.hip)
            return DeviceInfo(kind="cuda", vendor="amd", name=props.name, architecture=arch,
                              software=software)
        software["cuda"] = str(torch.version.cuda)
        cc = float(f"{props.major}.{props.minor}")
        return DeviceInfo(kind="cuda", vendor="nvidia", name=props.name,
                          architecture=f"sm_{props.major}{props.minor}", compute_capability=cc,
                          software=software)

    def load_callable(self, root: Path, ref: str, package: str) -> Callable[..., Any]:
        file_name, _, attr = ref.partition(":")
        path = (root / file_name).resolve()
        root = root.resolve()
        if not path.is_relative_to(root):
            raise BuildError(f"{file_name} is outside the task folder", file=file_name)
        if not path.is_file():
            raise BuildError("file not found", file=file_name)
        import_from_source_only(root)
        _ensure_package(package, root)
        module_name = f"{package}." + ".".join(Path(file_name).with_suffix("").parts)
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(
                module_name, path, loader=_SourceOnlyLoader(module_name, str(path)))
            if spec is None or spec.loader is None:
                raise BuildError("cannot import", file=file_name)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except BuildError:  # a compiled backend's build at import: already says where
                sys.modules.pop(module_name, None)
                raise
            except BaseException as exc:
                sys.modules.pop(module_name, None)
                file, line = innermost_location(exc, root)
                raise BuildError(f"import failed: {type(exc).__name__}: {exc}"
                                 f"{_bytecode_hint(exc, package, root)}",
                                 file=file or file_name, line=line) from exc
        fn = getattr(module, attr, None)
        if fn is None or not callable(fn):
            raise BuildError(f"{file_name} defines no callable {attr!r}", file=file_name)
        return fn

    def prepare(self, fn: Callable[..., Any], inputs: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Plain Python needs no compile step; compiled backends launch once here."""
        return None

    def readiness(self) -> BackendReadiness:
        """Whether this host can build and run candidates of this backend (``aka smoke``)."""
        try:
            import torch
        except ImportError as exc:
            return BackendReadiness(build=False, run=False, detail=f"PyTorch missing: {exc}")
        gpu = torch.cuda.is_available()
        return BackendReadiness(build=True, run=True, detail=(
            "PyTorch on the GPU" if gpu else "PyTorch on the CPU (no GPU visible)"))
