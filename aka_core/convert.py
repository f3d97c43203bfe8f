"""The one cattrs converter that turns validated data into models and models into plain data."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import cattrs

from aka_core.gpus import GpuModel, target_model

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=True)
converter.register_structure_hook(Path, lambda value, _: Path(value))
converter.register_unstructure_hook(Path, str)
# A target GPU is written as its name (``target_gpu_model: H100``) and read back as its model.
converter.register_structure_hook(GpuModel, lambda value, _: target_model(value))
converter.register_unstructure_hook(GpuModel, lambda model: model.name)


def structure(data: Any, cls: type[T]) -> T:
    return converter.structure(data, cls)


def unstructure(obj: Any) -> Any:
    return converter.unstructure(obj)
