"""GPU memory shared between the judge and a runner, through the CUDA driver API (ctypes).

Two kinds of sharing, chosen by who may open the memory:

* ``Arena``: a runner's input slots and control words (and the baseline's copies of its
  outputs) are a virtual-memory allocation (``cuMemCreate``) exported as a file descriptor and
  handed to the judge over a Unix socket. A descriptor is a capability: no other process (the
  other side's runner included) can open the memory without being handed it.
* A candidate's outputs are read where its kernels wrote them (the judge must read them right
  after its timed window, before the candidate can touch them again): the candidate exports the
  allocation that holds them as a legacy IPC handle, which the judge opens. Legacy handles can be
  guessed by any process on the machine, so nothing the judge or the baseline owns is ever
  exported that way: only the candidate's own memory is.

Each side opens the other's memory bounded by the size the driver maps, never by what the other
process claims. Only the judge's process and a runner's process use this module; nothing here is
imported on a machine without an NVIDIA GPU.
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
                     "cuIpcCloseMemHandle", "cuMemGetAddressRange_v2", "cuGetErrorString",
                     "cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
                     "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAllocationGranularity",
                     "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle"):
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


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3


def _prop() -> _AllocationProp:
    import torch

    prop = _AllocationProp()
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    prop.location = _Location(CU_MEM_LOCATION_TYPE_DEVICE, torch.cuda.current_device())
    return prop


def granularity() -> int:
    size = ctypes.c_size_t()
    _check(_driver().cuMemGetAllocationGranularity(ctypes.byref(size), ctypes.byref(_prop()),
                                                   ctypes.c_int(0)),
           "cuMemGetAllocationGranularity")
    return int(size.value)


def rounded(nbytes: int) -> int:
    step = granularity()
    return max(step, -(-nbytes // step) * step)


class _Mapped:
    """A physical allocation mapped at a reserved address range of this process, read-write."""

    ptr = 0

    def _map(self, handle: int, nbytes: int) -> None:
        import torch

        lib = _driver()
        self.handle, self.nbytes = handle, nbytes
        ptr = ctypes.c_uint64()
        _check(lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(nbytes),
                                       ctypes.c_size_t(0), ctypes.c_uint64(0),
                                       ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        try:
            _check(lib.cuMemMap(ptr, ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                                ctypes.c_ulonglong(handle), ctypes.c_ulonglong(0)),
                   f"cuMemMap({nbytes} bytes)")
        except CudaError:
            lib.cuMemAddressFree(ptr, ctypes.c_size_t(nbytes))
            raise
        access = _AccessDesc(_Location(CU_MEM_LOCATION_TYPE_DEVICE, torch.cuda.current_device()),
                             CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        try:
            _check(lib.cuMemSetAccess(ptr, ctypes.c_size_t(nbytes), ctypes.byref(access),
                                      ctypes.c_size_t(1)), "cuMemSetAccess")
        except CudaError:
            lib.cuMemUnmap(ptr, ctypes.c_size_t(nbytes))
            lib.cuMemAddressFree(ptr, ctypes.c_size_t(nbytes))
            raise
        self.ptr = int(ptr.value)
        self.bytes = byte_tensor(self.ptr, nbytes)

    def close(self) -> None:
        if self.ptr:
            import torch

            torch.cuda.synchronize()
            self.bytes = None
            lib = _driver()
            lib.cuMemUnmap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes))
            lib.cuMemAddressFree(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes))
            lib.cuMemRelease(ctypes.c_ulonglong(self.handle))
            self.ptr = 0


class Arena(_Mapped):
    """A runner's own allocation (inputs, control words, the baseline's copied outputs), shared
    with the judge as a file descriptor: a capability only the process it is handed to holds.
    (A legacy CUDA IPC handle is 64 bytes anyone can guess and open: a candidate opened one
    derived from its own on an H200.) ``export_fd`` makes a new descriptor to send."""

    def __init__(self, nbytes: int):
        _ensure_context()
        nbytes = rounded(nbytes)
        handle = ctypes.c_ulonglong()
        _check(_driver().cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(nbytes),
                                     ctypes.byref(_prop()), ctypes.c_ulonglong(0)),
               f"cuMemCreate({nbytes})")
        try:
            self._map(int(handle.value), nbytes)
        except CudaError:
            _driver().cuMemRelease(handle)
            raise

    def export_fd(self) -> int:
        fd = ctypes.c_int(-1)
        _check(_driver().cuMemExportToShareableHandle(
            ctypes.byref(fd), ctypes.c_ulonglong(self.handle),
            ctypes.c_int(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), ctypes.c_ulonglong(0)),
            "cuMemExportToShareableHandle")
        return int(fd.value)


class ImportedArena(_Mapped):
    """Another process's ``Arena``, from the descriptor it sent; ``nbytes`` (what the judge asked
    for) is mapped, which fails if the allocation behind the descriptor is smaller."""

    def __init__(self, fd: int, nbytes: int):
        _ensure_context()
        nbytes = rounded(nbytes)
        handle = ctypes.c_ulonglong()
        _check(_driver().cuMemImportFromShareableHandle(
            ctypes.byref(handle), ctypes.c_void_p(fd),
            ctypes.c_int(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)),
            "cuMemImportFromShareableHandle")
        try:
            self._map(int(handle.value), nbytes)
        except CudaError:
            _driver().cuMemRelease(handle)
            raise


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
