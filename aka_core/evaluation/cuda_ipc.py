"""GPU memory shared between the judge and a runner, through the CUDA driver API (ctypes).

PyTorch's own tensor sharing exports a whole caching-allocator segment, which can hold other
tensors of the exporting process: a runner that opened it could read them. Here every shared
buffer is its own ``cuMemAlloc`` allocation holding nothing else, wrapped as a tensor without a
copy. The judge exports buffers (a runner's input slots); a runner exports the allocations that
hold its outputs; each side opens the other's handles and bounds every access by the size the
driver reports for the mapping, never by what the other process claims.

Only the judge's process and a runner's process use this module; nothing here is imported on a
machine without an NVIDIA GPU.
"""

from __future__ import annotations

import ctypes
from typing import Any

HANDLE_BYTES = 64
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1

_cuda: ctypes.CDLL | None = None


class CudaError(RuntimeError):
    pass


def _driver() -> ctypes.CDLL:
    global _cuda
    if _cuda is None:
        lib = ctypes.CDLL("libcuda.so.1")
        for name in ("cuStreamWaitValue32_v2", "cuStreamWriteValue32_v2"):
            if not hasattr(lib, name):  # older drivers: the first versions under plain names
                setattr(lib, name, getattr(lib, name.removesuffix("_v2")))
            getattr(lib, name).restype = ctypes.c_int
        for name in ("cuMemAlloc_v2", "cuMemFree_v2", "cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2",
                     "cuIpcCloseMemHandle", "cuMemGetAddressRange_v2", "cuGetErrorString"):
            getattr(lib, name).restype = ctypes.c_int
        _cuda = lib
    return _cuda


def _check(code: int, what: str) -> None:
    if code != 0:
        text = ctypes.c_char_p()
        _driver().cuGetErrorString(code, ctypes.byref(text))
        raise CudaError(f"{what} failed: {text.value.decode() if text.value else code}")


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]


def _ensure_context() -> None:
    import torch

    torch.cuda.init()
    torch.cuda.current_device()
    torch.cuda.synchronize()  # makes the primary context current on this thread


def allocate(nbytes: int) -> int:
    _ensure_context()
    ptr = ctypes.c_uint64()
    _check(_driver().cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1))),
           f"cuMemAlloc({nbytes})")
    return int(ptr.value)


def free(ptr: int) -> None:
    _driver().cuMemFree_v2(ctypes.c_uint64(ptr))


def export(ptr: int) -> bytes:
    """The IPC handle of the allocation that contains ``ptr``."""
    handle = _Handle()
    _check(_driver().cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(ptr)),
           "cuIpcGetMemHandle")
    return bytes(handle.reserved)


def address_range(ptr: int) -> tuple[int, int]:
    """(base, size) of the allocation (or mapping) that contains ``ptr``."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(_driver().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                             ctypes.c_uint64(ptr)), "cuMemGetAddressRange")
    return int(base.value), int(size.value)


def open_handle(handle: bytes) -> tuple[int, int]:
    """Map another process's allocation; returns (pointer, size of the mapping)."""
    if not isinstance(handle, bytes) or len(handle) != HANDLE_BYTES:
        raise CudaError("an IPC handle is 64 bytes")
    _ensure_context()
    h = _Handle()
    ctypes.memmove(h.reserved, handle, HANDLE_BYTES)
    ptr = ctypes.c_uint64()
    _check(_driver().cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h,
                                           ctypes.c_uint(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)),
           "cuIpcOpenMemHandle")
    base, size = address_range(int(ptr.value))
    return int(ptr.value), size - (int(ptr.value) - base)


def close_handle(ptr: int) -> None:
    _driver().cuIpcCloseMemHandle(ctypes.c_uint64(ptr))


CU_STREAM_WAIT_VALUE_GEQ = 0x0


def stream_wait_at_least(stream: int, address: int, value: int) -> None:
    """Make ``stream`` wait (in the GPU's front end, using no SMs) until the 32-bit word at
    ``address`` is at least ``value``. The word may be written by another process."""
    _check(_driver().cuStreamWaitValue32_v2(ctypes.c_void_p(stream), ctypes.c_uint64(address),
                                            ctypes.c_uint32(value),
                                            ctypes.c_uint(CU_STREAM_WAIT_VALUE_GEQ)),
           "cuStreamWaitValue32")


def stream_write(stream: int, address: int, value: int) -> None:
    """Write the 32-bit ``value`` at ``address`` once ``stream``'s earlier work is complete
    (with a memory barrier: the earlier work's writes are visible first)."""
    _check(_driver().cuStreamWriteValue32_v2(ctypes.c_void_p(stream), ctypes.c_uint64(address),
                                             ctypes.c_uint32(value), ctypes.c_uint(0)),
           "cuStreamWriteValue32")


class _Interface:
    """An object with ``__cuda_array_interface__``: PyTorch wraps it without copying."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


def byte_tensor(ptr: int, nbytes: int) -> Any:
    """A uint8 CUDA tensor over ``nbytes`` at ``ptr`` (no copy; the memory must outlive it)."""
    import torch

    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8, device="cuda")
    return torch.as_tensor(_Interface(ptr, nbytes), device="cuda")


def view(buffer: Any, offset: int, dtype: Any, shape: tuple[int, ...],
         strides: tuple[int, ...] | None = None) -> Any:
    """A typed view of ``buffer`` (a uint8 tensor) at byte ``offset``; bounds are checked."""
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    if offset % itemsize:
        raise ValueError(f"offset {offset} is not aligned to {itemsize} bytes")
    if strides is None:
        strides = contiguous_strides(shape)
    extent = span_elements(shape, strides)
    if offset < 0 or offset + extent * itemsize > buffer.numel():
        raise ValueError(f"a view of {extent * itemsize} bytes at offset {offset} does not fit in "
                         f"{buffer.numel()} bytes")
    typed = buffer[offset: offset + max(extent, 1) * itemsize].view(dtype)
    return typed.as_strided(shape, strides)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def span_elements(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """How many elements a strided view spans (0 for an empty tensor)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(shape, strides, strict=True))


class Arena:
    """One dedicated allocation holding a runner's slots, owned and freed by the judge."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.ptr = allocate(nbytes)
        self.handle = export(self.ptr)
        self.bytes = byte_tensor(self.ptr, nbytes)

    def close(self) -> None:
        if self.ptr:
            import torch

            torch.cuda.synchronize()
            self.bytes = None
            free(self.ptr)
            self.ptr = 0


class Mapping:
    """Another process's allocation mapped here; accesses are bounded by the real mapping."""

    def __init__(self, handle: bytes):
        self.handle = handle
        self.ptr, self.nbytes = open_handle(handle)
        self.bytes = byte_tensor(self.ptr, self.nbytes)

    def close(self) -> None:
        if self.ptr:
            self.bytes = None
            close_handle(self.ptr)
            self.ptr = 0
