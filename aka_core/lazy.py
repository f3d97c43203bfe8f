"""Names a package exports but imports on first use (PEP 562), for the public faces that must
stay cheap to import (``aka_core.plugin``, ``aka_core.testing``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(module: str, table: Mapping[str, tuple[str, str | None]],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``table`` (name -> (module, attribute or
    None for the module itself)): a name is imported on first use and kept in ``namespace`` (the
    module's globals), so later lookups are plain attributes."""

    def getattr_(name: str) -> Any:
        try:
            module_name, attribute = table[name]
        except KeyError:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
        imported = importlib.import_module(module_name)
        value = imported if attribute is None else getattr(imported, attribute)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *table})

    return getattr_, dir_
