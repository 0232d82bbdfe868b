"""CUDA virtual-memory allocations shared by file descriptor between the parent and one worker.

An allocation is made with ``cuMemCreate`` for a POSIX file-descriptor handle, exported with
``cuMemExportToShareableHandle`` (an fd passed to the worker as ``SCM_RIGHTS``), imported there with
``cuMemImportFromShareableHandle`` and mapped with ``cuMemMap`` + ``cuMemSetAccess``. Unlike legacy
CUDA IPC handles (``cudaIpcGetMemHandle``, what torch's ``reduce_tensor`` uses), which a root
parent's child running as another user cannot open, an fd works across users: the worker runs as
``nobody``. The allocation is its own physical memory, nothing else lives in it, and a process
reaches only what it mapped. ``cuda-bindings`` (``cuda.bindings.driver``) is imported on first use.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any


class DeviceShareError(Exception):
    """A CUDA driver call of the device route failed (the message names the call and the error)."""


def driver() -> Any:
    """``cuda.bindings.driver``, or DeviceShareError naming the package to install."""
    try:
        from cuda.bindings import driver as cu
    except ImportError as err:
        raise DeviceShareError(f"cuda-bindings is not installed ({err}): pip install cuda-bindings") from None
    return cu


def _check(result: Any, what: str) -> Any:
    """The value of a driver call's ``(CUresult, value...)`` tuple, or DeviceShareError."""
    cu = driver()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        raise DeviceShareError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    return values[0] if len(values) == 1 else values


def _current_context(device: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    cu = driver()
    _check(cu.cuInit(0), "cuInit")
    ctx = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is not None and int(ctx) != 0:
        return
    dev = _check(cu.cuDeviceGet(device), "cuDeviceGet")
    _check(cu.cuCtxSetCurrent(_check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")), "cuCtxSetCurrent")


def _properties(device: int) -> Any:
    cu = driver()
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    return prop


@cache
def granularity(device: int) -> int:
    """The allocation granularity of shareable device memory (2 MiB on current GPUs)."""
    cu = driver()
    _current_context(device)
    return int(_check(cu.cuMemGetAllocationGranularity(_properties(device),
                                                       cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                      "cuMemGetAllocationGranularity"))


def round_up(nbytes: int, device: int) -> int:
    g = granularity(device)
    return max(g, -(-nbytes // g) * g)


class _Raw:
    """A CUDA array interface over part of a mapping; torch keeps it (and so the mapping) alive."""

    def __init__(self, mapping: Mapping, offset: int, nbytes: int):
        self.mapping = mapping
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (mapping.address + offset, False), "version": 3, "strides": None}


class Mapping:
    """One shareable allocation mapped read-write into this process for ``device``."""

    def __init__(self, handle: Any, size: int, device: int):
        cu = driver()
        self.handle, self.size, self.device = handle, size, device
        self.closed = False
        self.address = int(_check(cu.cuMemAddressReserve(size, 0, 0, 0), "cuMemAddressReserve"))
        try:
            _check(cu.cuMemMap(self.address, size, 0, handle, 0), "cuMemMap")
            access = cu.CUmemAccessDesc()
            access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            access.location.id = device
            access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            _check(cu.cuMemSetAccess(self.address, size, [access], 1), "cuMemSetAccess")
        except DeviceShareError:
            cu.cuMemUnmap(self.address, size)
            cu.cuMemAddressFree(self.address, size)
            raise

    def tensor(self, offset: int = 0, nbytes: int | None = None) -> Any:
        """``nbytes`` from ``offset`` (default: all) as a flat uint8 torch tensor with a storage of its
        own (no copy): tensors made this way never share a storage, whatever their neighbours."""
        import torch

        nbytes = self.size - offset if nbytes is None else nbytes
        if self.closed or offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise DeviceShareError(f"bytes {offset}..{offset + nbytes} are outside the {self.size}-byte mapping")
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=torch.device("cuda", self.device))
        return torch.as_tensor(_Raw(self, offset, nbytes), device=torch.device("cuda", self.device))

    def close(self) -> None:
        """Wait for the device, unmap, release the handle (the memory goes once every process let go)."""
        if self.closed:
            return
        import torch

        cu = driver()
        self.closed = True
        try:
            torch.cuda.synchronize(self.device)
        except RuntimeError:  # a device in an error state: unmap all the same
            pass
        cu.cuMemUnmap(self.address, self.size)
        cu.cuMemAddressFree(self.address, self.size)
        cu.cuMemRelease(self.handle)


def create(nbytes: int, device: int) -> tuple[Mapping, int]:
    """A new zeroed shareable allocation of at least ``nbytes``, mapped here, and an fd exporting it
    (the caller closes the fd once sent). Zeroed: recycled device memory may hold anyone's old data."""
    cu = driver()
    _current_context(device)
    size = round_up(nbytes, device)
    handle = _check(cu.cuMemCreate(size, _properties(device), 0), "cuMemCreate")
    try:
        fd = int(_check(cu.cuMemExportToShareableHandle(
            handle, cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            "cuMemExportToShareableHandle"))
    except DeviceShareError:
        cu.cuMemRelease(handle)
        raise
    try:
        mapping = Mapping(handle, size, device)
    except DeviceShareError:
        cu.cuMemRelease(handle)
        os.close(fd)
        raise
    try:
        mapping.tensor().zero_()
    except BaseException:
        os.close(fd)
        mapping.close()
        raise
    return mapping, fd


def open_fd(fd: int, size: int, device: int) -> Mapping:
    """Import an exported allocation from ``fd`` and map ``size`` bytes of it (the caller closes the fd)."""
    cu = driver()
    _current_context(device)
    handle = _check(cu.cuMemImportFromShareableHandle(
        fd, cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), "cuMemImportFromShareableHandle")
    try:
        return Mapping(handle, size, device)
    except DeviceShareError:
        cu.cuMemRelease(handle)
        raise


@cache
def unsupported(device: int) -> str | None:
    """Why the device route cannot be used on this device here (None: it can): no cuda-bindings, no
    virtual-memory management or fd handles on the device, or a trial allocation that fails."""
    try:
        cu = driver()
        _current_context(device)
        dev = _check(cu.cuDeviceGet(device), "cuDeviceGet")
        attrs = cu.CUdevice_attribute
        for attr in (attrs.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                     attrs.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED):
            if not _check(cu.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute"):
                return f"{attr.name} is 0 on device {device}"
        mapping, fd = create(1, device)
    except (DeviceShareError, RuntimeError) as err:  # RuntimeError: torch cannot wrap the mapping
        return str(err)
    os.close(fd)
    mapping.close()
    return None
