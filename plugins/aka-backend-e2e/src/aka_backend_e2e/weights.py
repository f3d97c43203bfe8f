"""The builtin model's weights file: safetensors written by this module, and its digest.

The format: 8 bytes (little-endian u64) giving the header's length N, N bytes of a JSON header
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`` (padded
with spaces to a multiple of 8), then the tensors' raw little-endian bytes. The writer is always
this module's, even where the ``safetensors`` package is installed: names sorted, one fixed
layout, so a (config, seed) makes the same bytes, hence the same ``weights_digest``, on every
host. Any safetensors reader can read the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from aka_core.plugin import ConfigError, Problem

if TYPE_CHECKING:
    import torch

    from aka_backend_e2e.model import ModelConfig

_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64",
           "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
           "BOOL": "bool"}
MAX_HEADER_BYTES = 100 * 2**20


class WeightsError(ValueError):
    """A weights file that is malformed or is not the one the task names."""


def sha256_digest(data: bytes | memoryview) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def same_digest(a: str, b: str) -> bool:
    """Digests compared with or without their ``sha256:`` prefix."""
    return a.strip().lower().removeprefix("sha256:") == b.strip().lower().removeprefix("sha256:")


def encode_safetensors(tensors: Mapping[str, torch.Tensor],
                       metadata: Mapping[str, str] | None = None) -> bytes:
    import torch

    codes = {getattr(torch, v): k for k, v in _DTYPES.items()}
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in sorted(metadata.items())}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        if t.dtype not in codes:
            raise WeightsError(f"{name}: dtype {t.dtype} cannot be saved")
        data = t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def decode_safetensors(data: bytes | bytearray, source: str) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file's bytes, validated (views of ``data``)."""
    import torch

    if len(data) < 8:
        raise WeightsError(f"{source}: too short to be a safetensors file")
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    if n > MAX_HEADER_BYTES or 8 + n > len(data):
        raise WeightsError(f"{source}: the header length {n} does not fit the file")
    try:
        header = json.loads(bytes(data[8:8 + n]))
    except ValueError as exc:
        raise WeightsError(f"{source}: the header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise WeightsError(f"{source}: the header is not a JSON object")
    body = memoryview(data)[8 + n:]
    out: dict[str, torch.Tensor] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = getattr(torch, _DTYPES[entry["dtype"]])
            shape = [int(s) for s in entry["shape"]]
            begin, end = (int(v) for v in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise WeightsError(f"{source}: tensor {name!r} has a malformed entry") from None
        itemsize = torch.empty((), dtype=dtype).element_size()
        numel = 1
        for s in shape:
            if s < 0:
                raise WeightsError(f"{source}: tensor {name!r} has a negative size")
            numel *= s
        if not 0 <= begin <= end <= len(body) or end - begin != numel * itemsize:
            raise WeightsError(f"{source}: tensor {name!r}'s offsets do not match its shape")
        if numel == 0:
            out[name] = torch.empty(shape, dtype=dtype)
            continue
        raw = torch.frombuffer(body[begin:end], dtype=torch.uint8)
        if (8 + n + begin) % itemsize:  # a view needs aligned data: copy this one
            raw = raw.clone()
        out[name] = raw.view(dtype).view(shape)
    return out


def save_weights(tensors: Mapping[str, torch.Tensor], path: Path,
                 metadata: Mapping[str, str] | None = None) -> str:
    """Write atomically (a temporary file renamed into place); returns the digest."""
    data = encode_safetensors(tensors, metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return sha256_digest(data)


def read_weights(path: Path, expected_digest: str | None = None
                 ) -> tuple[dict[str, torch.Tensor], str]:
    """The tensors and the digest of the bytes they were decoded from (read once, so what is
    checked is what is used). A digest other than ``expected_digest`` is a ``WeightsError``."""
    data = bytearray(Path(path).read_bytes())
    digest = sha256_digest(data)
    if expected_digest is not None and not same_digest(digest, expected_digest):
        raise WeightsError(f"{path}: weights digest mismatch: the file has {digest}, "
                           f"expected {expected_digest}")
    return decode_safetensors(data, str(path)), digest


def weights_file_name(config: ModelConfig, seed: int) -> str:
    return f"{config.name}-seed{seed}.safetensors"


def ensure_weights(config: ModelConfig, seed: int, cache_dir: Path) -> tuple[Path, str]:
    """The weights of (config, seed) in ``cache_dir`` (made once, then reused) and their digest.

    A cached file is trusted only by its digest: callers compare it with the task's
    ``weights_digest`` (and may delete a file that differs, to have it made again)."""
    from aka_backend_e2e.model import init_weights

    path = Path(cache_dir) / weights_file_name(config, seed)
    if path.is_file():
        return path, file_digest(path)
    try:
        digest = save_weights(init_weights(config, seed), path,
                              {"config": config.name, "seed": str(seed)})
    except OSError as exc:
        raise ConfigError(Problem(f"cannot write the model weights: {exc}", file=path,
                                  hint="make the weights cache folder writable")) from exc
    return path, digest
