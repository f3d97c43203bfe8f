"""The one cattrs converter that turns validated data into models and models into plain data."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import cattrs

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=True)
converter.register_structure_hook(Path, lambda value, _: Path(value))
converter.register_unstructure_hook(Path, str)


def structure(data: Any, cls: type[T]) -> T:
    return converter.structure(data, cls)


def unstructure(obj: Any) -> Any:
    return converter.unstructure(obj)
