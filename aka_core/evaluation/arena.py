"""A runner's arena as the judge sees it: where one slot's inputs lie (aligned, contiguous), typed
views of them, the mapping of the arena a runner exported, and checked views of the outputs a
runner names (``OutputReader``). Shared by the correctness phase (``judge``) and ``timing``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aka_core.evaluation import protocol
from aka_core.evaluation.failures import INFRA, FailureKind, JudgeFailure
from aka_core.evaluation.sides import SideFailure

if TYPE_CHECKING:  # the judge passes itself in; this module never imports it
    from aka_core.evaluation.judge import Judge

ALIGN = 256
CTRL_BYTES = 256


class OutputReader:
    """Makes checked views of a runner's outputs: the candidate's in the allocations it exported
    (mapped here, cached by handle), the baseline's in its arena's output region (``region``:
    the arena's bytes and the region's bounds; nothing else of the baseline is ever exported)."""

    def __init__(self, side: str):
        self.side = side
        self.mappings: dict[bytes, Any] = {}
        self.region: tuple[Any, int, int] | None = None

    def view(self, desc: Any) -> Any:
        import torch

        from aka_core.evaluation import cuda_ipc

        if isinstance(desc, dict) and desc.get("in_arena") is True:
            return self._in_region(desc)
        handle, offset, dtype, shape, strides = protocol.checked_gpu_descriptor(desc)
        self._dense(shape, strides)
        numel = 1
        for size in shape:
            numel *= size
        if numel == 0:
            return torch.empty(shape, dtype=dtype, device="cuda")
        if self.side != "candidate":
            raise protocol.ProtocolError("the baseline's outputs must be copied to its arena")
        mapping = self.mappings.get(handle)
        if mapping is None:
            if len(self.mappings) >= 4096:
                raise protocol.ProtocolError("too many distinct output allocations")
            try:
                mapping = cuda_ipc.Mapping(handle)
            except cuda_ipc.CudaError as exc:
                raise protocol.ProtocolError(f"an output's memory cannot be opened: {exc}") from None
            self.mappings[handle] = mapping
        try:
            return cuda_ipc.view(mapping.bytes, offset, dtype, shape, strides)
        except ValueError as exc:
            raise protocol.ProtocolError(f"an output is out of bounds: {exc}") from None

    def _in_region(self, desc: Mapping[str, Any]) -> Any:
        from aka_core.evaluation import cuda_ipc

        if self.region is None:
            raise protocol.ProtocolError("an output points into the runner's input arena")
        buffer, lo, hi = self.region
        offset, dtype, shape, strides = protocol.checked_placement(desc)
        self._dense(shape, strides)
        if offset < lo:
            raise protocol.ProtocolError("an output lies before the arena's output region")
        try:
            return cuda_ipc.view(buffer[:hi], offset, dtype, shape, strides)
        except ValueError as exc:
            raise protocol.ProtocolError(f"an output is out of bounds: {exc}") from None

    @staticmethod
    def _dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        if not protocol.plain_dense(shape, strides):
            raise protocol.ProtocolError(f"an output of shape {list(shape)} has strides "
                                         f"{list(strides)}: outputs must be plain dense "
                                         "(contiguous) tensors")

    def close(self) -> None:
        for mapping in self.mappings.values():
            mapping.close()
        self.mappings = {}


def output_budget(ref: list[Any]) -> int:
    """Bytes set aside in the baseline's arena for its outputs: twice the reference's (a
    reference may compute in a narrower type than the baseline returns), aligned."""
    return sum(2 * -(-t.numel() * t.element_size() // ALIGN) * ALIGN + ALIGN for t in ref)


def map_runner_arena(judge: Judge, side: str, reply: Mapping[str, Any], size: int) -> Any:
    """Map the arena a runner allocated, from the descriptor it sent on its socket; ``size``
    bytes are mapped, which fails if the allocation is smaller."""
    from aka_core.evaluation import cuda_ipc

    kind = FailureKind.PROTOCOL if side == "candidate" else INFRA
    tag = reply.get("arena_fd")
    if not isinstance(tag, str):
        raise JudgeFailure(kind, f"{side}: its reply to setup names no arena")
    try:
        fd = judge.runners[side].receive_fd(tag)
    except SideFailure as exc:
        raise JudgeFailure(kind, f"{side}: {exc}") from None
    try:
        return cuda_ipc.ImportedArena(fd, size)
    except cuda_ipc.CudaError as exc:
        raise JudgeFailure(kind, f"{side}: its input arena cannot be mapped: {exc}") from None
    finally:
        os.close(fd)


def input_signature(inputs: Mapping[str, Any]) -> tuple[Any, ...]:
    import torch

    return tuple((name, (tuple(v.shape), str(v.dtype)) if isinstance(v, torch.Tensor) else
                  ("value", json.dumps(v, sort_keys=True, default=str)))
                 for name, v in sorted(inputs.items()))


def slot_layout(inputs: Mapping[str, Any], start: int) -> tuple[dict[str, Any], int]:
    """Where each tensor input of one slot lives in an arena (contiguous, 256-byte aligned), and
    the end offset. Non-tensor inputs travel as JSON values."""
    import torch

    layout: dict[str, Any] = {}
    offset = start
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            if value.device.type != "cuda":
                raise JudgeFailure(FailureKind.TASK_ERROR, f"input {name!r} is on {value.device}; the "
                                   "inputs factory must put tensors on the device it is given")
            offset = -(-offset // ALIGN) * ALIGN
            layout[name] = {"offset": offset, "dtype": protocol.dtype_name(value.dtype),
                            "shape": list(value.shape),
                            "strides": list(protocol.contiguous_strides(value.shape))}
            offset += value.numel() * value.element_size()
        else:
            try:
                json.dumps(value)
            except TypeError:
                raise JudgeFailure(FailureKind.TASK_ERROR, f"input {name!r} is a {type(value).__name__}; "
                                   "inputs are tensors or JSON values") from None
            layout[name] = {"value": value}
    return layout, -(-offset // ALIGN) * ALIGN


def arena_views(buffer: Any, layout: Mapping[str, Any], shift: int = 0) -> dict[str, Any]:
    """Typed views of ``layout``'s tensors in ``buffer`` (a uint8 tensor), ``shift`` bytes on."""
    from aka_core.evaluation import cuda_ipc

    return {name: cuda_ipc.view(buffer, item["offset"] + shift,
                                protocol.torch_dtype(item["dtype"]), tuple(item["shape"]))
            for name, item in layout.items() if "offset" in item}


def shifted(layout: Mapping[str, Any], shift: int) -> dict[str, Any]:
    return {name: ({**item, "offset": item["offset"] + shift} if "offset" in item else item)
            for name, item in layout.items()}
