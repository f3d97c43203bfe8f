"""Native candidates: C++/CUDA/HIP sources built into a shared library and called through ctypes.

The shared machinery of the compiled backends (``cuda``, ``hip``):

* ``build`` runs a backend's compiler commands once per content key (compiler identity, flags,
  the sources and the headers beside them) into ``$AKA_BUILD_CACHE`` (default
  ``~/.cache/aka/builds``), under a file lock, so an unchanged candidate is never rebuilt and
  two evaluations building the same sources wait for one build;
* a failed build raises ``BuildError`` at the first error, with the file relative to the
  candidate's folder and the line, parsed from nvcc's ``file(12): error`` or clang/gcc's
  ``file:12:5: error`` diagnostics; the full compiler output is kept in the message's tail;
* ``Library`` loads the result and calls its ``extern "C"`` functions: tensors pass as device
  pointers, ``int`` as ``int64_t``, ``float`` as ``float``, ``bool`` as ``bool``, ctypes values
  as themselves, and the current stream is appended as the last argument; a non-zero return
  value (the launcher's ``cudaGetLastError()``/``hipGetLastError()``) raises ``RuntimeError``.

Compile-only evaluation (a host without the target GPU): the evaluator sets ``AKA_COMPILE_ONLY=1``
and ``AKA_TARGET_ARCH`` in the worker's environment; backends build for that architecture and
return a ``CompiledOnly`` whose functions refuse to run.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from aka_core.errors import BuildError
from aka_core.kits.python_backend import PythonBackend

CACHE_ENV = "AKA_BUILD_CACHE"
COMPILE_ONLY_ENV = "AKA_COMPILE_ONLY"
TARGET_ARCH_ENV = "AKA_TARGET_ARCH"
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl"})
OUTPUT_TAIL = 6000


def compile_only() -> bool:
    """Whether this process builds for a GPU it cannot run on (set by the evaluator)."""
    return os.environ.get(COMPILE_ONLY_ENV, "") not in ("", "0")


def target_architecture() -> str | None:
    """The architecture the evaluator asked for (``sm_90``, ``gfx942``), or None."""
    return os.environ.get(TARGET_ARCH_ENV) or None


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aka" / "builds"


def caller_folder(depth: int = 2) -> Path:
    """The folder of the module that called the function calling this (for relative sources)."""
    frame = sys._getframe(depth)
    return Path(frame.f_code.co_filename).resolve().parent


def resolve_sources(sources: Sequence[str | os.PathLike[str]], folder: Path) -> tuple[Path, ...]:
    paths = []
    for source in sources:
        path = Path(source)
        path = (path if path.is_absolute() else folder / path).resolve()
        if not path.is_file():
            raise BuildError("source file not found", file=_shown(path, folder))
        paths.append(path)
    if not paths:
        raise BuildError("no source files given")
    return tuple(paths)


# --------------------------------------------------------------------------- diagnostics


@attrs.frozen(kw_only=True)
class Diagnostic:
    file: str
    line: int
    severity: str
    message: str
    column: int | None = None


_NVCC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|warning|catastrophic "
                   r"error)[^:]*: (?P<msg>.*)$")
_CLANG = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|"
                    r"error|warning): (?P<msg>.*)$")
_PTXAS = re.compile(r"^ptxas (?:fatal|error)\s*: (?P<msg>.*)$")


def parse_diagnostics(output: str, root: Path) -> list[Diagnostic]:
    """Compiler diagnostics in ``output`` (nvcc, clang, gcc, ptxas), paths relative to ``root``."""
    found = []
    for raw in output.splitlines():
        line = raw.strip()
        match = _NVCC.match(line) or _CLANG.match(line)
        if match:
            found.append(Diagnostic(
                file=_shown(Path(match["file"]), root), line=int(match["line"]),
                column=int(match["col"]) if match.groupdict().get("col") else None,
                severity="error" if "error" in match["sev"] else "warning",
                message=match["msg"].strip()))
            continue
        match = _PTXAS.match(line)
        if match:
            found.append(Diagnostic(file="", line=0, severity="error", message=match["msg"]))
    return found


def _shown(path: Path, root: Path) -> str:
    try:
        resolved = path if path.is_absolute() else (root / path)
        return str(resolved.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def build_failure(output: str, root: Path, what: str) -> BuildError:
    """The first error of a failed build as a ``BuildError``, the compiler's output in its tail."""
    diagnostics = parse_diagnostics(output, root)
    errors = [d for d in diagnostics if d.severity == "error"]
    tail = output.strip()[-OUTPUT_TAIL:]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
        return BuildError(f"{what} failed: {first.message}{more}\n{tail}",
                          file=first.file or None, line=first.line or None)
    return BuildError(f"{what} failed\n{tail}")


# --------------------------------------------------------------------------- building


@attrs.frozen(kw_only=True)
class Build:
    """What ``build`` produced: the build folder, whether it came from the cache, the log."""

    folder: Path
    cached: bool
    key: str

    def path(self, name: str) -> Path:
        return self.folder / name


def content_key(identity: str, commands: Sequence[Sequence[str]],
                sources: Sequence[Path]) -> str:
    """Hash of what a build depends on: compiler identity, commands, sources and nearby headers."""
    digest = hashlib.sha256()
    digest.update(identity.encode())
    # A source's folder is not part of what is built (its content is, below): the same sources
    # in another copy of the task or candidate reuse the build.
    named = {str(source): f"{{source:{source.name}}}" for source in sources}
    for command in commands:
        digest.update(b"\0cmd\0" + "\x1f".join(named.get(arg, arg) for arg in command).encode())
    seen: set[Path] = set()
    for source in sources:
        for path in [source, *_headers_beside(source)]:
            if path in seen:
                continue
            seen.add(path)
            digest.update(b"\0file\0" + path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def _headers_beside(source: Path) -> list[Path]:
    return sorted(p for p in source.parent.rglob("*") if p.suffix in HEADER_SUFFIXES and p.is_file())


def build(backend: str, sources: Sequence[Path], commands: Sequence[Sequence[str]], *,
          identity: str, root: Path, what: str = "build", timeout: float = 600.0) -> Build:
    """Run ``commands`` in a fresh build folder, once per content key.

    Each command is an argv list; ``{out}`` in an argument is replaced by the build folder.
    ``identity`` names the compiler (its version output). ``root`` is the candidate's folder, to
    which diagnostics are made relative. Raises ``BuildError`` when a command fails.
    """
    key = content_key(identity, commands, sources)
    final = cache_root() / backend / key
    if (final / ".complete").is_file():
        return Build(folder=final, cached=True, key=key)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _locked(final.parent / f"{key}.lock"):
        if (final / ".complete").is_file():  # built by another process while we waited
            return Build(folder=final, cached=True, key=key)
        work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=final.parent))
        try:
            log = []
            for command in commands:
                argv = [arg.replace("{out}", str(work)) for arg in command]
                output = _run(argv, cwd=root, timeout=timeout)
                log.append("$ " + " ".join(argv) + "\n" + output.text)
                if output.code != 0:
                    raise build_failure(output.text, root, what)
            (work / "build.log").write_text("\n".join(log), encoding="utf-8")
            (work / ".complete").write_text(key, encoding="utf-8")
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(work, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return Build(folder=final, cached=False, key=key)


@attrs.frozen
class _Output:
    code: int
    text: str


def _run(argv: list[str], *, cwd: Path, timeout: float) -> _Output:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, errors="replace",
                              timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise BuildError(f"compiler not found: {argv[0]} ({exc.strerror})") from exc
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"the build took longer than {timeout:.0f} s: {' '.join(argv[:3])} ...") \
            from exc
    return _Output(proc.returncode, (proc.stdout or "") + (proc.stderr or ""))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@functools.cache
def tool_identity(argv0: str) -> str:
    """The compiler's ``--version`` output (asked once per process): part of every cache key, so
    a new compiler rebuilds."""
    return _run([argv0, "--version"], cwd=Path.cwd(), timeout=60).text.strip()


def first_executable(*candidates: str | None) -> str | None:
    """The first candidate path that is an executable file (None entries are skipped)."""
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def option_given(flags: Sequence[str], names: Sequence[str]) -> bool:
    """Whether ``flags`` hold one of the options ``names`` (``-arch sm_90`` or ``-arch=sm_90``)."""
    return any(flag.split("=")[0] in names for flag in flags)


# --------------------------------------------------------------------------- calling


StreamGetter = Callable[[], int]


def torch_current_stream() -> int:
    import torch

    return int(torch.cuda.current_stream().cuda_stream)


class Library:
    """A built shared library; ``lib.name(*args)`` calls ``extern "C" int name(..., stream)``."""

    def __init__(self, path: Path, *, sources: Sequence[Path], root: Path, api: str = "CUDA",
                 stream: StreamGetter = torch_current_stream) -> None:
        try:
            self._cdll = ctypes.CDLL(str(path))
        except OSError as exc:
            raise BuildError(f"the built library does not load: {exc}",
                             file=_shown(sources[0], root)) from exc
        self.path = path
        self._sources = tuple(_shown(s, root) for s in sources)
        self._api = api
        self._stream = stream
        self._functions: dict[str, Function] = {}

    def require(self, *names: str) -> Library:
        """Check at load time that the library exports ``names`` (a clear build error if not)."""
        for name in names:
            self.function(name)
        return self

    def function(self, name: str) -> Function:
        if name not in self._functions:
            try:
                symbol = getattr(self._cdll, name)
            except AttributeError:
                raise BuildError(
                    f"{', '.join(self._sources)} exports no function {name!r}: declare it "
                    f'extern "C" int {name}(..., {self._api.lower()}Stream_t stream)',
                    file=self._sources[0]) from None
            symbol.restype = ctypes.c_int
            self._functions[name] = Function(name, symbol, self._api, self._stream)
        return self._functions[name]

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.function(name)


class Function:
    """One exported launcher; converts arguments and appends the current stream."""

    def __init__(self, name: str, symbol: Any, api: str, stream: StreamGetter) -> None:
        self.name, self._symbol, self._api, self._stream = name, symbol, api, stream

    def __call__(self, *args: Any) -> None:
        converted = [convert_argument(self.name, i, arg) for i, arg in enumerate(args)]
        code = self._symbol(*converted, ctypes.c_void_p(self._stream()))
        if code != 0:
            raise RuntimeError(f"{self.name} returned {self._api} error {code}")


def convert_argument(function: str, index: int, value: Any, *, memory: str = "cuda",
                     need: str = "a kernel needs GPU memory") -> Any:
    """One launcher argument as a ctypes value; a tensor must be in ``memory`` (its device type)."""
    if isinstance(value, ctypes._SimpleCData | ctypes.Array | ctypes.Structure):
        return value
    if isinstance(value, bool):
        return ctypes.c_bool(value)
    if isinstance(value, int):
        return ctypes.c_int64(value)
    if isinstance(value, float):
        return ctypes.c_float(value)
    data_ptr = getattr(value, "data_ptr", None)
    if data_ptr is not None:
        device = getattr(value, "device", None)
        if device is not None and getattr(device, "type", memory) != memory:
            raise TypeError(f"{function}: argument {index} is a tensor on {device}; {need}")
        return ctypes.c_void_p(data_ptr())
    raise TypeError(f"{function}: argument {index} has type {type(value).__name__}; pass tensors, "
                    "int (int64_t), float (float), bool or a ctypes value")


class CompiledOnly:
    """What a compile-only build returns: the functions exist but refuse to run."""

    def __init__(self, architecture: str, folder: Path, what: str) -> None:
        self.architecture, self.folder, self._what = architecture, folder, what

    def require(self, *names: str) -> CompiledOnly:
        return self

    def function(self, name: str) -> Callable[..., None]:
        def refuse(*args: Any) -> None:
            raise RuntimeError(f"{name}: built for {self.architecture} only ({self._what}); this "
                               "host cannot run it")
        return refuse

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.function(name)


def builds_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """What the module of ``fn`` built (its ``Library`` and ``CompiledOnly`` globals), for the
    evaluation record: ``{"built": [...]}`` with each build folder and architecture."""
    built = []
    for value in list(getattr(fn, "__globals__", {}).values()):
        if isinstance(value, Library):
            built.append({"library": str(value.path)})
        elif isinstance(value, CompiledOnly):
            built.append({"architecture": value.architecture, "folder": str(value.folder)})
    return {"built": built}


class NativeBackend(PythonBackend):
    """The base of backends whose candidates build a library at import (``cuda``, ``hip``)."""

    build_ahead = "import"
    """A builder (``prebuild``) builds the side's library by importing it, compile-only."""

    def prepare(self, fn: Callable[..., Any], inputs: Mapping[str, Any]) -> dict[str, Any] | None:
        """The build ran when the module was imported; launch once to surface launch errors.

        Compile-only: nothing is launched; returns the builds the module made, for the record.
        """
        if compile_only():
            return builds_of(fn)
        import torch

        fn(**inputs)
        torch.cuda.synchronize()
        return None

