"""The narrow protocol between the judge and a runner, and how tensors cross it.

Messages are JSON objects, one per line, on two pipes (judge -> runner commands, runner -> judge
replies). The judge reads replies with a deadline and a size limit, and believes nothing in them
except what it can check: tensors are bytes it reads itself (from the message on a CPU, from GPU
memory it maps on a GPU), with their shape, dtype and strides validated against what the task's
reference returns.

On a GPU, inputs live in an arena the judge allocates and exports to one runner; a runner's
outputs live in its own allocations, which it exports and the judge maps (bounded by the size the
driver reports). On a CPU, tensors travel as raw bytes in the messages (no pickle: the judge never
unpickles anything a runner sends).
"""

from __future__ import annotations

import base64
import json
import os
import select
import time
from collections.abc import Mapping, Sequence
from typing import Any

# A reply larger than this is a protocol violation (CPU tensors travel inside replies).
MAX_REPLY_BYTES = 512 * 2**20
DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64",
          "int32", "int16", "int8", "uint8", "bool", "complex64")
MAX_DIMS = 8


class ProtocolError(Exception):
    """A runner sent something the judge cannot accept (malformed, oversized, out of bounds)."""


class RunnerGone(Exception):
    """The runner closed its pipe or did not answer in time."""

    def __init__(self, message: str, *, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class LineReader:
    """Reads newline-terminated JSON objects from a file descriptor, with deadlines and a cap."""

    def __init__(self, fd: int, limit: int = MAX_REPLY_BYTES):
        self.fd = fd
        self.limit = limit
        self.buffer = bytearray()

    def read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline])
                del self.buffer[: newline + 1]
                try:
                    message = json.loads(line)
                except (ValueError, RecursionError) as exc:
                    raise ProtocolError(f"a reply is not JSON: {exc}") from None
                if not isinstance(message, dict):
                    raise ProtocolError("a reply is not a JSON object")
                return message
            if len(self.buffer) > self.limit:
                raise ProtocolError(f"a reply exceeds {self.limit} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RunnerGone("no reply in time", timed_out=True)
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise RunnerGone("the runner closed its pipe (it exited or crashed)")
            self.buffer += chunk


MAX_FILE_CHARS = 512
MAX_LINE = 10**9
MAX_FACTS_BYTES = 16 * 1024


def source_place(file: Any, line: Any) -> dict[str, Any]:
    """Where a side says its failure is (``file``, ``line``), as a record holds it: a string of at
    most ``MAX_FILE_CHARS``, an int from 0 to ``MAX_LINE`` (a bool is none); anything else None.
    Both come from the side's reply: a ``line`` of "7a" or infinity once made its compile
    failure a malformed record, an ``infra_error`` retried for it, and a 200 MB ``file`` was
    copied into the record whole."""
    return {"file": file[:MAX_FILE_CHARS] if isinstance(file, str) else None,
            "line": line if type(line) is int and 0 <= line <= MAX_LINE else None}


def side_facts(value: Any) -> dict[str, Any] | None:
    """What a side's reply says it built (``facts``), as a record holds it: a mapping of string
    keys whose JSON (no NaN) is at most ``MAX_FACTS_BYTES``; anything else None (a list or a
    string once made any later verdict a malformed record, retried as an ``infra_error``)."""
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        return None
    try:
        if len(json.dumps(value, allow_nan=False)) > MAX_FACTS_BYTES:
            return None
    except (TypeError, ValueError, RecursionError):
        return None
    return value


def send(fd: int, message: Mapping[str, Any]) -> None:
    data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# --------------------------------------------------------------------------- tensor metadata


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: Any) -> Any:
    import torch

    if name not in DTYPES:
        raise ProtocolError(f"dtype {name!r} is not allowed")
    return getattr(torch, name)


def checked_shape(value: Any, field: str = "shape") -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > MAX_DIMS or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**40 for v in value):
        raise ProtocolError(f"{field} must be a list of at most {MAX_DIMS} non-negative ints")
    return tuple(value)


def describe(tensor: Any) -> dict[str, Any]:
    return {"dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape),
            "strides": list(tensor.stride())}


# --------------------------------------------------------------------------- CPU tensors


def encode_cpu(tensor: Any) -> dict[str, Any]:
    """A CPU tensor as JSON: metadata and its bytes (contiguous), base64."""
    import torch

    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    data = t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {**describe(tensor), "data": base64.b64encode(data).decode("ascii")}


def decode_cpu(desc: Any) -> Any:
    """A tensor from ``encode_cpu``'s form, validated; always a fresh contiguous CPU tensor."""
    import torch

    if not isinstance(desc, dict):
        raise ProtocolError("a tensor must be a JSON object")
    dtype = torch_dtype(desc.get("dtype"))
    shape = checked_shape(desc.get("shape"))
    data = desc.get("data")
    if not isinstance(data, str):
        raise ProtocolError("a tensor's data must be base64 text")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError as exc:
        raise ProtocolError(f"a tensor's data is not base64: {exc}") from None
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = 1
    for size in shape:
        numel *= size
    if len(raw) != numel * itemsize:
        raise ProtocolError(f"a tensor of shape {list(shape)} and dtype {dtype_name(dtype)} needs "
                            f"{numel * itemsize} bytes, got {len(raw)}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()


def encode_inputs_cpu(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs for a runner on a CPU: tensors as bytes, other values as JSON."""
    import torch

    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            out[name] = {"tensor": encode_cpu(value)}
        else:
            out[name] = {"value": value}
    return out


def decode_inputs_cpu(encoded: Mapping[str, Any]) -> dict[str, Any]:
    return {name: decode_cpu(item["tensor"]) if "tensor" in item else
            meta_tensor(item["meta"]) if "meta" in item else item["value"]
            for name, item in encoded.items()}


def encode_inputs_meta(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs as their shapes and dtypes only (``meta``): what a builder compiles kernels for
    (``prebuild``); no data travels."""
    import torch

    return {name: {"meta": {"dtype": dtype_name(v.dtype), "shape": list(v.shape)}}
            if isinstance(v, torch.Tensor) else {"value": v} for name, v in inputs.items()}


def meta_tensor(desc: Any) -> Any:
    """A tensor on PyTorch's ``meta`` device (a shape and a dtype, no memory; its address is 0,
    aligned as any allocation) of ``desc``'s dtype and shape, validated."""
    import torch

    if not isinstance(desc, dict):
        raise ProtocolError("a meta tensor must be a JSON object")
    return torch.empty(checked_shape(desc.get("shape")), dtype=torch_dtype(desc.get("dtype")),
                       device="meta")


# --------------------------------------------------------------------------- GPU descriptors


def gpu_descriptor(tensor: Any, handle: bytes, base: int) -> dict[str, Any]:
    """What a runner sends for a GPU tensor it exported: the allocation's handle, the byte
    offset of the tensor's first element in it, and its metadata."""
    return {**describe(tensor), "handle": base64.b64encode(handle).decode("ascii"),
            "offset": tensor.data_ptr() - base}


def checked_gpu_descriptor(desc: Any) -> tuple[bytes, int, Any, tuple[int, ...], tuple[int, ...]]:
    """(handle, offset, dtype, shape, strides) of a runner's GPU tensor, or ProtocolError."""
    offset, dtype, shape, strides = checked_placement(desc)
    try:
        handle = base64.b64decode(desc.get("handle", ""), validate=True)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"a handle is not base64: {exc}") from None
    if len(handle) != 64:
        raise ProtocolError("a handle is 64 bytes")
    return handle, offset, dtype, shape, strides


def checked_placement(desc: Any) -> tuple[int, Any, tuple[int, ...], tuple[int, ...]]:
    """(offset, dtype, shape, strides) of a runner's GPU tensor, or ProtocolError."""
    if not isinstance(desc, dict):
        raise ProtocolError("a tensor must be a JSON object")
    dtype = torch_dtype(desc.get("dtype"))
    shape = checked_shape(desc.get("shape"))
    strides = checked_shape(desc.get("strides"), "strides")
    if len(strides) != len(shape):
        raise ProtocolError("strides and shape differ in length")
    offset = desc.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ProtocolError("offset must be a non-negative int")
    return offset, dtype, shape, strides


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def plain_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Row-major contiguous (dimensions of size 1 may carry any stride)."""
    expected = contiguous_strides(shape)
    return all(s == e or size == 1 for size, s, e in zip(shape, strides, expected, strict=True))
