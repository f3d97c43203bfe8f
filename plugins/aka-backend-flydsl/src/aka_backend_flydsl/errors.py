"""FlyDSL compile failures as ``BuildError``s that point at the candidate's file and line.

FlyDSL raises ``DSLCompileError`` when MLIR verification or a lowering pass fails; each of its
``diagnostics`` carries the failing operation's source location as a chain of frames, innermost
first (the kernel line, then the lines that called it). The first frame inside the candidate's
folder is the line to show. A Python error raised while FlyDSL traces the kernel body (a wrong
type, an undefined name) keeps the kernel's own traceback frames, so the deepest frame inside
the folder is the line.
"""

from __future__ import annotations

from pathlib import Path

from aka_core.plugin import BuildError, innermost_location

MESSAGE_CHARS = 4000


def locate(exc: BaseException, root: Path | None) -> tuple[str | None, int | None]:
    """The candidate file (relative to ``root``) and line where a FlyDSL compile failed."""
    if root is None:
        return None, None
    root = root.resolve()
    for record in getattr(exc, "diagnostics", None) or []:
        for frame in getattr(record, "chain", None) or []:
            path = Path(frame.filename)
            if path.is_absolute() and path.resolve().is_relative_to(root):
                return str(path.resolve().relative_to(root)), frame.line
    return innermost_location(exc, root)


def compile_failure(exc: BaseException, root: Path | None, what: str) -> BuildError:
    """A ``BuildError`` for a kernel that did not compile (``what``: FlyDSL or Triton)."""
    file, line = locate(exc, root)
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__name__ not in text.split(":", 1)[0]:
        text = f"{type(exc).__name__}: {text}"
    return BuildError(f"{what} compilation failed: {text[:MESSAGE_CHARS]}", file=file, line=line)
