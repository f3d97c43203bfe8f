"""The ``triton`` backend: Triton candidates on NVIDIA/AMD GPUs, or Triton's CPU interpreter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aka_core.plugin import (
    BackendReadiness,
    BackendSpec,
    BuildError,
    DeviceInfo,
    PythonBackend,
    hookimpl,
    innermost_location,
    native,
)


class TritonBackend(PythonBackend):
    name = "triton"

    def __init__(self) -> None:
        self._roots: dict[int, Path] = {}

    def worker_environment(self, device: str) -> dict[str, str]:
        # The interpreter must be chosen before triton is imported: the worker's environment.
        return {"TRITON_INTERPRET": "1"} if device == "cpu" else {}

    build_ahead = "call"
    """A builder (``prebuild``) compiles this backend's kernels by calling the side's function on
    each case's shapes, with no GPU (``ahead``)."""

    def preload(self, device: str) -> None:
        # Before the lock, what a side's first kernel would otherwise pay inside it: Triton's
        # import (~0.3 s), its driver's utilities (a small module compiled once into the runner's
        # Triton cache), and the compiler's identity that every kernel's cache key includes: a
        # hash of Triton's sources and of libtriton (~0.4 s, once per process) and the backend's
        # (``ptxas --version``). No kernel is compiled or launched here.
        import triton
        import triton.language  # noqa: F401

        if native.compile_only():  # a builder: kernels compiled for the GPU's target, not run
            from aka_backend_triton import ahead

            ahead.install(native.target_architecture() or "")
            return
        if device != "cuda":
            return
        from triton.compiler.compiler import make_backend
        from triton.runtime import driver
        from triton.runtime.cache import triton_key

        make_backend(driver.active.get_current_target()).hash()
        triton_key()

    def describe_device(self, device: str) -> DeviceInfo:
        import attrs
        import triton

        info = super().describe_device(device)
        software = {**info.software, "triton": triton.__version__}
        if device == "cpu":
            software["mode"] = "interpreter (TRITON_INTERPRET=1)"
        return attrs.evolve(info, software=software)

    def readiness(self) -> BackendReadiness:
        try:
            import triton
        except ImportError:
            return BackendReadiness(build=False, run=False, vendors=("nvidia", "amd"), detail=(
                "Triton is not installed: GPU builds of PyTorch bring it; on a CPU machine "
                "pip install triton"))
        import torch

        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            return BackendReadiness(build=True, run=True, vendors=("nvidia", "amd"),
                                    detail=f"Triton {triton.__version__} on {name}")
        return BackendReadiness(build=True, run=False, vendors=("nvidia", "amd"), detail=(
            f"Triton {triton.__version__}, no GPU: correctness through the interpreter only, "
            "never timed"))

    def load_callable(self, root: Path, ref: str, package: str) -> Callable[..., Any]:
        fn = super().load_callable(root, ref, package)
        self._roots[id(fn)] = root.resolve()
        return fn

    def prepare(self, fn: Callable[..., Any], inputs: Mapping[str, Any]) -> None:
        """Launch once so that Triton's JIT compiles now; map compile errors to file:line."""
        from triton.compiler.errors import CompilationError

        root = self._roots.get(id(fn))
        try:
            fn(**inputs)
            _synchronize()
        except CompilationError as exc:
            file, line = locate_compilation_error(exc, root) if root else (None, None)
            raise BuildError(_first_line(exc), file=file, line=line) from exc
        except Exception as exc:
            if _is_compile_failure(exc) and root is not None:
                file, line = innermost_location(exc, root)
                raise BuildError(f"{type(exc).__name__}: {exc}", file=file, line=line) from exc
            raise


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _is_compile_failure(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name in {"CompileTimeAssertionFailure", "UnsupportedLanguageConstruct", "OutOfResources",
                    "PTXASError"}


def _first_line(exc: Any) -> str:
    message = getattr(exc, "error_message", None) or str(exc)
    return f"Triton compilation failed: {message}".strip()


def locate_compilation_error(exc: Any, root: Path) -> tuple[str | None, int | None]:
    """Map Triton's function-relative line (``node.lineno`` in ``src``) to a file and line."""
    src = getattr(exc, "src", None)
    node_line = getattr(getattr(exc, "node", None), "lineno", None)
    if not src or node_line is None:
        return innermost_location(exc, root)
    first = src.splitlines()[0].strip()
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for index, line in enumerate(lines):
            if line.strip() == first:
                return str(path.relative_to(root)), index + node_line
    return innermost_location(exc, root)


@hookimpl
def aka_register_backends() -> list[BackendSpec]:
    return [BackendSpec(
        name="triton", factory=TritonBackend,
        description="Triton kernels on NVIDIA/AMD GPUs; Triton's interpreter on CPU (no timing)",
    )]
