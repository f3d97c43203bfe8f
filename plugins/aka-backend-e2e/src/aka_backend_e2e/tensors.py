"""Tensors on the engine's pipe (the operator oracle's ``check``): JSON, never pickle.

``{"dtype": "bfloat16", "shape": [..], "data": "<base64 of the raw little-endian bytes>"}``.
Both sides decode with ``decode_tensor``, which validates the dtype, the shape and the byte count
before it decodes anything (a malformed or oversized tensor is a ``TensorFormatError``).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from aka_core.plugin import protocol

if TYPE_CHECKING:
    import torch

MAX_TENSOR_BYTES = 64 * 2**20
ALLOWED_DTYPES = ("float32", "float16", "bfloat16", "int64", "int32", "uint8", "bool")
_KEYS = {"dtype", "shape", "data"}


class TensorFormatError(ValueError):
    """A tensor description that is malformed, oversized or of a dtype not allowed."""


def encode_tensor(tensor: torch.Tensor) -> dict[str, Any]:
    import torch

    t = tensor.detach().to("cpu").contiguous()
    data = t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {"dtype": protocol.dtype_name(t.dtype), "shape": list(t.shape),
            "data": base64.b64encode(data).decode("ascii")}


def is_tensor(value: Any) -> bool:
    """Whether a JSON value claims to be a tensor (then it must decode, or be refused)."""
    return isinstance(value, dict) and "dtype" in value


def decode_tensor(desc: Any, max_bytes: int = MAX_TENSOR_BYTES) -> torch.Tensor:
    """A fresh contiguous CPU tensor from ``encode_tensor``'s form; refuses anything else."""
    import torch

    if not isinstance(desc, dict) or set(desc) != _KEYS:
        raise TensorFormatError(f"a tensor must be an object with exactly the keys "
                                f"{sorted(_KEYS)}")
    if desc["dtype"] not in ALLOWED_DTYPES:
        raise TensorFormatError(f"dtype {desc['dtype']!r} is not one of {list(ALLOWED_DTYPES)}")
    try:
        shape = protocol.checked_shape(desc["shape"])
    except protocol.ProtocolError as exc:
        raise TensorFormatError(str(exc)) from None
    data = desc["data"]
    if not isinstance(data, str):
        raise TensorFormatError("a tensor's data must be base64 text")
    itemsize = torch.empty((), dtype=getattr(torch, desc["dtype"])).element_size()
    numel = 1
    for size in shape:
        numel *= size
    nbytes = numel * itemsize
    if nbytes > max_bytes:
        raise TensorFormatError(f"a tensor of {nbytes} bytes exceeds the limit of {max_bytes}")
    if len(data) != 4 * (-(-nbytes // 3)):
        raise TensorFormatError(f"a tensor of shape {list(shape)} and dtype {desc['dtype']} "
                                f"needs {nbytes} bytes; its data has another length")
    try:
        return protocol.decode_cpu(desc)
    except protocol.ProtocolError as exc:
        raise TensorFormatError(str(exc)) from None


def encode_value(value: Any) -> Any:
    """A tensor encoded, a JSON scalar as is."""
    import torch

    return encode_tensor(value) if isinstance(value, torch.Tensor) else value


def decode_value(value: Any) -> Any:
    """A tensor decoded; a JSON number, bool or None as is; anything else refused."""
    if is_tensor(value):
        return decode_tensor(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TensorFormatError(f"an argument must be a tensor or a number, not "
                            f"{type(value).__name__}")
