"""The device route of the wire: a message's tensors in GPU memory shared with one worker, never via the host.

The parent keeps one pool per worker (:class:`ParentPool`): a CUDA allocation shared by file
descriptor (:mod:`solbench.worker.vmm`) that holds nothing but what that worker is sent and sends
back. A request's tensors are copied into it device to device, each at its own aligned offset, with
a reply area behind them sized from the request (the outputs it can return); the header, marked
``"wire": "cuda"``, describes them as :mod:`solbench.worker.wire` does and names the pool
(``"pool": {"chunk", "bytes", "device", "reply_at", "reply_bytes", "host"}``). A new, larger pool
is sent as an fd (``SCM_RIGHTS``) with the first message that needs it; the worker imports and maps
it once (:class:`WorkerPool`) and hands the candidate views of it, each tensor with a storage of its
own. The worker writes its outputs into the reply area (a reply that does not fit goes by the
memfd route instead) and refers to a request tensor as ``{"$shared": j}``, without copying it;
the parent copies every output out of the pool device to device at once, and each ``$shared``
reference into a fresh parent tensor (:meth:`ParentPool.resolve`), so every check it makes reads
parent-private memory. Offsets are computed by each receiver from the descriptors, as for memfd.
"""

from __future__ import annotations

import gc
import json
import math
import os
import socket
from typing import Any

from solbench.data import ITEMSIZE
from solbench.worker import vmm
from solbench.worker.wire import (
    _LEN,
    ProtocolError,
    _describe,
    _json_default,
    _nbytes,
    _sendall,
    encode_header,
    pack,
    send_encoded,
)

ALIGN = 512  # what torch's caching allocator gives: kernels may assume it of their inputs
SHRINK_BELOW = 256 << 20  # a pool up to this size is kept for any smaller request
_CPU, _CUDA = "cpu", "cuda"


def offsets(sizes: list[int]) -> tuple[list[int], int]:
    """Each tensor's offset (``ALIGN``-aligned) and the total."""
    out, total = [], 0
    for n in sizes:
        out.append(total)
        total += -(-n // ALIGN) * ALIGN
    return out, total


def _expected_bytes(expect: Any) -> int:
    """The aligned bytes of one call's outputs as the request declares them."""
    sizes = [math.prod(e["shape"]) * ITEMSIZE[e["dtype"]] for e in expect or () if e.get("dtype") in ITEMSIZE]
    return offsets(sizes)[1]


def reply_area_bytes(header: dict[str, Any]) -> int:
    """Room for the tensors a reply to this request carries (solbench.worker.main's protocol): one
    call's outputs, or for a timing the last outputs of every set, the kept samples' and the refresh run's."""
    per_call = _expected_bytes(header.get("expect"))
    if header.get("op") in ("call", "profile"):
        return per_call
    if header.get("op") == "time":
        verify = header.get("verify") or {}
        return per_call * (len(header.get("sets", ())) + len(verify.get("keep", ())) + 1)
    if header.get("op") == "burst":
        return per_call * int(header.get("calls", 0))
    if "reply_room" in header:  # a problem host's request: the parent sizes the room from the problem's declarations
        return int(header["reply_room"])
    if header.get("op") == "burst_prepare":
        # The burst's room, its outputs' and its edits' (``edit_bytes``), made now: a pool grown by the
        # burst itself was created and mapped inside the parent's clock (seconds for GiBs; on the H200
        # honest SDPA and softmax candidates read 20-300 ms a call that way and were rejected).
        return per_call * int(header.get("calls", 0)) + int(header.get("edit_bytes", 0))
    return 0


def pool_bytes(header: dict[str, Any]) -> int:
    """The bytes a device pool needs to carry this request: its tensors, aligned, and its reply area.
    Sent ahead as a ``reply_room``, it makes the pool before a window whose requests must not grow it."""
    _, tensors = pack(header)
    return offsets([_nbytes(t) for t in tensors])[1] + reply_area_bytes(header)


def device_index(device: str) -> int:
    """The CUDA device index of ``cuda`` / ``cuda:N`` (plain ``cuda``: the current one)."""
    import torch

    index = torch.device(device).index
    return torch.cuda.current_device() if index is None else index


class ParentPool:
    """The parent's side of one worker's pool: sends requests through it and reads replies out of it."""

    def __init__(self, device: int, shrink: bool = False):
        self.device = device
        # A pool far larger than a request is made again smaller (a problem host's: one that served a large
        # workload would hold its memory for the rest of the run). Not a worker's: its burst's room is made
        # ahead by burst_prepare, and must not be made again inside the parent's clock.
        self.shrink = shrink
        self.mapping: vmm.Mapping | None = None
        self.chunk = 0
        self._sent: list[tuple[int, Any, tuple[int, ...], str]] = []  # offset, dtype, shape, device type
        self._reply = (0, 0)  # offset and bytes of the reply area

    def _room(self, nbytes: int) -> int | None:
        """Make sure the pool holds ``nbytes``; the fd of a new one to send, or None."""
        if self.mapping is not None and nbytes <= self.mapping.size and not (
                self.shrink and self.mapping.size > max(4 * nbytes, SHRINK_BELOW)):
            return None
        self.close()
        self.mapping, fd = vmm.create(nbytes, self.device)
        self.chunk += 1
        return fd

    def send(self, sock: socket.socket, header: dict[str, Any], deadline: float | None) -> None:
        """Copy the header's tensors into the pool and send the header (raises vmm.DeviceShareError
        before anything is sent when the pool cannot be made or filled: the caller may send by memfd)."""
        fd = None
        try:
            try:
                raw, fd = self._fill(header)
            except (RuntimeError, ValueError, TypeError) as err:  # torch's errors (out of memory) included
                raise vmm.DeviceShareError(f"filling the device pool: {err}") from None
            _sendall(sock, _LEN.pack(len(raw)) + raw, deadline, fd)
        finally:
            if fd is not None:
                os.close(fd)

    def _fill(self, header: dict[str, Any]) -> tuple[bytes, int | None]:
        """The header's tensors copied into the pool; the header's bytes and the fd of a new pool."""
        import torch

        body, tensors = pack(header)
        places, total = offsets([_nbytes(t) for t in tensors])
        reply = reply_area_bytes(header)
        self._sent = []
        fd = self._room(total + reply)
        assert self.mapping is not None
        try:
            for t, at in zip(tensors, places, strict=True):
                if _nbytes(t):
                    self.mapping.tensor(at, _nbytes(t)).view(t.dtype).view(t.shape).copy_(t.detach())
            torch.cuda.synchronize(self.device)  # the worker reads it as soon as the header arrives
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        self._sent = [(at, t.dtype, tuple(t.shape), t.device.type) for t, at in zip(tensors, places, strict=True)]
        self._reply = (total, reply)
        body.update(tensors=[_describe(t) for t in tensors], wire="cuda",
                    pool={"chunk": self.chunk, "bytes": self.mapping.size, "device": self.device,
                          "reply_at": total, "reply_bytes": reply,
                          "host": [i for i, t in enumerate(tensors) if t.device.type == _CPU]})
        return json.dumps(body, allow_nan=True, default=_json_default).encode("utf-8"), fd

    def read(self, pool: Any, descs: list[tuple[str, tuple[int, ...], int]], fd: int | None) -> list[Any]:
        """A device-route reply's tensors, copied out of the reply area into fresh parent tensors."""
        import torch

        from solbench.data import torch_dtype

        if fd is not None:
            raise ProtocolError("a device-route reply may not carry a file descriptor")
        if self.mapping is None or not isinstance(pool, dict) or pool.get("chunk") != self.chunk:
            raise ProtocolError("the reply names a device pool that was not sent to this worker")
        start, room = self._reply
        places, total = offsets([n for _, _, n in descs])
        if total > room:
            raise ProtocolError(f"a reply of {total} tensor bytes does not fit its {room}-byte device area")
        out = []
        for (dtype, shape, n), at in zip(descs, places, strict=True):
            t = torch.empty(shape, dtype=torch_dtype(dtype), device=torch.device(_CUDA, self.device))
            if n:
                t.reshape(-1).view(torch.uint8).copy_(self.mapping.tensor(start + at, n))
            out.append(t)
        return out

    def resolve(self, obj: Any) -> Any:
        """``obj`` with every ``{"$shared": j}`` replaced by a fresh copy of request tensor ``j`` as
        the pool holds it now (the worker's view of that input after the call). Each tensor may be
        named once per reply: a reply cannot make the parent copy one input a million times."""
        used: set[int] = set()

        def walk(x: Any) -> Any:
            if isinstance(x, dict):
                if set(x) == {"$shared"}:
                    return self._snapshot(x["$shared"], used)
                return {k: walk(v) for k, v in x.items()}
            if isinstance(x, list):
                return [walk(v) for v in x]
            return x

        return walk(obj)

    def _snapshot(self, j: Any, used: set[int]) -> Any:
        import torch

        if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < len(self._sent) or self.mapping is None:
            raise ProtocolError(f"bad shared tensor reference {j!r}")
        if j in used:
            raise ProtocolError(f"shared tensor {j} named twice in one reply")
        used.add(j)
        at, dtype, shape, kind = self._sent[j]
        t = torch.empty(shape, dtype=dtype, device=torch.device(_CUDA, self.device))
        if t.numel():
            t.reshape(-1).view(torch.uint8).copy_(self.mapping.tensor(at, t.numel() * t.element_size()))
        return t.cpu() if kind == _CPU else t

    def close(self) -> None:
        if self.mapping is not None:
            self.mapping.close()
            self.mapping = None
            self._sent = []


class WorkerPool:
    """The worker's side: maps the pool the parent sends and writes replies into its reply area."""

    def __init__(self) -> None:
        self.mapping: vmm.Mapping | None = None
        self.chunk: int | None = None
        self.active = False  # the request being served came by the device route
        self.error: str | None = None  # why the last device-route request's tensors could not be mapped
        self._shared: list[Any] = []
        self._reply = (0, 0)

    def begin(self) -> None:
        """Before each request is read: by default it is not a device-route one."""
        self.active, self.error, self._shared = False, None, []

    def status(self) -> str:
        """'device' when the pool is mapped, else 'memfd' and why (the parent then sends by memfd)."""
        if self.mapping is not None and self.error is None:
            return "device"
        return f"memfd ({self.error or 'no device pool was sent'})"

    def read(self, pool: Any, descs: list[tuple[str, tuple[int, ...], int]], fd: int | None) -> list[Any]:
        """The request's tensors as views of the pool (host ones copied back to the host); on a
        mapping failure, empty host tensors and :attr:`error` set (the request then fails)."""
        import torch

        from solbench.data import torch_dtype

        self.active = True
        try:
            if not isinstance(pool, dict):
                raise vmm.DeviceShareError("the request's pool is not described")
            if fd is not None:
                self._attach(pool, fd)
            elif self.mapping is None or pool.get("chunk") != self.chunk:
                raise vmm.DeviceShareError("the request names a device pool this worker has not mapped")
            assert self.mapping is not None
            places, total = offsets([n for _, _, n in descs])
            self._reply = (int(pool.get("reply_at", total)), int(pool.get("reply_bytes", 0)))
            host = set(pool.get("host", ()))
            out = []
            for i, ((dtype, shape, n), at) in enumerate(zip(descs, places, strict=True)):
                t = self.mapping.tensor(at, n).view(torch_dtype(dtype)).view(shape)
                out.append(t.cpu() if i in host else t)
        except Exception as err:  # the driver's or torch's: the request fails, the worker stays up
            self.error = f"{type(err).__name__}: {err}"
            return [torch.empty(shape, dtype=torch_dtype(dtype)) for dtype, shape, _ in descs]
        self._shared = out
        return out

    def _attach(self, pool: dict[str, Any], fd: int) -> None:
        import torch

        device = int(pool["device"])
        torch.cuda.set_device(device)
        if self.mapping is not None:
            # Views of the old pool in garbage not yet collected (a finished call's inputs, held in a cycle) die
            # before it is unmapped: a candidate that walks the garbage collector's objects read them unmapped
            # (H200, 2026-12-03: the super_batch exploit's batched GEMM failed in the worker, not its verdict).
            gc.collect()
            self.mapping.close()
            self.mapping = None
        self.mapping = vmm.open_fd(fd, int(pool["bytes"]), device)
        self.chunk = pool.get("chunk")

    def close(self) -> None:
        """Let go of the pool (the parent's ``release`` between records): its memory goes back once the
        parent lets go too; the next device-route request brings a new one."""
        if self.mapping is not None:
            self.mapping.close()
        self.mapping, self.chunk, self._shared = None, None, []

    def index_of(self, t: Any) -> int | None:
        """Which request tensor ``t`` is (the very object handed out), or None."""
        if not self.active or self.error is not None:
            return None
        return next((j for j, s in enumerate(self._shared) if s is t), None)

    @property
    def serving(self) -> bool:
        """The request being served came by the device route and its tensors are mapped."""
        return self.active and self.error is None and self.mapping is not None

    def encode(self, reply: dict[str, Any]) -> tuple[bytes, list[Any], str]:
        """The reply ready to send: in the reply area when the request came by the device route and
        its tensors fit there (copied now, so a device error is this request's), else as wire.py encodes it."""
        import torch

        body, tensors = pack(reply)
        places, total = offsets([_nbytes(t) for t in tensors])
        start, room = self._reply
        if not self.serving or not tensors or total > room or any(t.device.type != _CUDA for t in tensors):
            return (*encode_header(reply), "plain")
        assert self.mapping is not None
        for t, at in zip(tensors, places, strict=True):
            if _nbytes(t):
                self.mapping.tensor(start + at, _nbytes(t)).view(t.dtype).view(t.shape).copy_(t.detach())
        torch.cuda.synchronize()
        body.update(tensors=[_describe(t) for t in tensors], wire="cuda", pool={"chunk": self.chunk})
        return json.dumps(body, allow_nan=True, default=_json_default).encode("utf-8"), [], "device"

    @staticmethod
    def send(sock: socket.socket, encoded: tuple[bytes, list[Any], str], deadline: float | None = None,
             arena: Any = None) -> None:
        raw, tensors, how = encoded
        if how == "device":
            _sendall(sock, _LEN.pack(len(raw)) + raw, deadline)
        else:
            send_encoded(sock, raw, tensors, deadline, arena=arena)
