"""The byte format between the parent and a worker: framed JSON headers plus raw tensor bytes.

Nothing here unpickles: the parent reads untrusted bytes from a worker that runs candidate code,
and ``pickle.loads`` on those bytes would run code in the parent. A message is

    frame(header JSON)  frame(tensor 0 bytes)  frame(tensor 1 bytes)  ...

where a frame is an 8-byte little-endian length followed by that many bytes. The header is a JSON
object whose ``"tensors"`` list describes each tensor frame (``dtype``, ``shape``); inside the
header a tensor is referenced as ``{"$tensor": i}``. Every frame is checked against its
description and against the caller's byte budget before it is read, and every read has a deadline.

Large messages (``SHM_MIN_BYTES`` of tensors or more) carry their tensors in one anonymous
shared-memory file instead (``memfd``), passed with the header's length prefix as ``SCM_RIGHTS``
and marked ``"wire": "shm"``: the sender writes the tensors straight into it (a device-to-host copy
for CUDA tensors), the receiver reads each one with ``preadv`` into its own fresh tensor, at
offsets it computes itself from the descriptors. A socket moves a few hundred MB/s; this moves
memory-copy speed, which decides the harness's time on GB-sized workloads. The receiver never maps
the sender's file (a file truncated under a mapping would be SIGBUS in the parent), checks that it
is a regular file, and copies once, so a sender that writes on afterwards changes nothing it read.
The parent's requests reuse one sealed file per channel (:class:`SendArena`): the parent maps its own
file, which no receiver can shrink.
"""

from __future__ import annotations

import array
import fcntl
import json
import math
import mmap
import os
import socket
import stat
import struct
import time
from typing import Any

from solbench.data import ITEMSIZE

_LEN = struct.Struct("<Q")
MAX_HEADER_BYTES = 16 << 20
SHM_MIN_BYTES = 1 << 20  # below this, inline frames cost less than a memfd
_SHM_ALIGN = 64
ARENA_MAX_BYTES = 1 << 30  # a sender's reusable file (SendArena) holds messages up to this; larger ones get a fresh one
_MAX_FDS = 4  # room in the ancillary buffer: more than one fd is a protocol error


class WireError(Exception):
    """Base class: the connection cannot be used any more."""


class WireTimeout(WireError):
    """The deadline passed before a whole message arrived (or could be sent)."""


class WireClosed(WireError):
    """The other side closed the connection (it exited or was killed)."""


class SharedFileError(OSError):
    """A message's shared-memory file could not be made or filled (its size past the sender's file-size
    limit, no memory): raised before anything of the message is sent, so the channel is intact."""


class ProtocolError(WireError):
    """The other side sent something that is not a valid message."""


# --- encoding ----------------------------------------------------------------------------------

def pack(obj: Any) -> tuple[Any, list[Any]]:
    """Replace every torch.Tensor in a JSON-like structure by ``{"$tensor": i}``; return (obj, tensors)."""
    import torch

    tensors: list[Any] = []

    def walk(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            tensors.append(x)
            return {"$tensor": len(tensors) - 1}
        if isinstance(x, dict):
            return {str(k): walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        return x

    return walk(obj), tensors


def unpack(obj: Any, tensors: list[Any]) -> Any:
    """Inverse of :func:`pack`: put the received tensors back where their references are."""

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            if set(x) == {"$tensor"}:
                i = x["$tensor"]
                if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(tensors):
                    raise ProtocolError(f"bad tensor reference {i!r}")
                return tensors[i]
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(obj)


def _tensor_bytes(t: Any) -> memoryview:
    import torch

    flat = t.detach().to("cpu").contiguous().reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    return memoryview(flat.view(torch.uint8).numpy()).cast("B")


def _describe(t: Any) -> dict[str, Any]:
    name = str(t.dtype).removeprefix("torch.")
    if name not in ITEMSIZE:
        raise TypeError(f"dtype {name} cannot be sent (supported: {', '.join(ITEMSIZE)})")
    return {"dtype": name, "shape": [int(s) for s in t.shape]}


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size()


def _in_shm(tensors: list[Any]) -> bool:
    """Whether a message's tensors travel in shared memory (see the module docstring)."""
    return sum(_nbytes(t) for t in tensors) >= SHM_MIN_BYTES


def _shm_offsets(sizes: list[int]) -> tuple[list[int], int]:
    """Each tensor's offset in the shared file (aligned, so any dtype can view it) and the total."""
    offsets, total = [], 0
    for n in sizes:
        offsets.append(total)
        total += -(-n // _SHM_ALIGN) * _SHM_ALIGN
    return offsets, total


def _copy_into(m: mmap.mmap, tensors: list[Any]) -> None:
    """The tensors into a mapped file at :func:`_shm_offsets` (a device-to-host copy for CUDA ones)."""
    import torch

    offsets, _ = _shm_offsets([_nbytes(t) for t in tensors])
    buf = torch.frombuffer(m, dtype=torch.uint8)
    for t, off in zip(tensors, offsets, strict=True):
        n = _nbytes(t)
        if n:
            buf[off:off + n].view(t.dtype).view(t.shape).copy_(t.detach())
    del buf  # the mapping closes only once no tensor points into it


def _shm_write(tensors: list[Any]) -> int:
    """A new memfd holding the tensors at :func:`_shm_offsets`; the caller closes it."""

    total = _shm_offsets([_nbytes(t) for t in tensors])[1]
    fd = os.memfd_create("solbench-wire", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, total)
        with mmap.mmap(fd, total) as m:
            _copy_into(m, tensors)
    except BaseException:
        os.close(fd)
        raise
    return fd


class SendArena:
    """A sender's reusable shared-memory file: a message's tensors are written into pages already
    mapped and faulted in by the last one (a fresh memfd per message paid its page faults again: the
    parent's sends to the problem hosts were the lanes' busiest code on the H200, 2026-12-02; a 256 MiB
    write took 190 ms fresh, 32 ms reused, on the CPU). One per channel, used one request at a time:
    the receiver copies a request out before it replies, and the next is written after the reply.
    Sealed against shrinking and growing: a receiver keeping the fd cannot make the sender's mapping
    fault (SIGBUS) by truncating it; it grows by a new file."""

    def __init__(self, max_bytes: int = ARENA_MAX_BYTES):
        self.max_bytes = max_bytes
        self.fd: int | None = None
        self._map: mmap.mmap | None = None

    @property
    def size(self) -> int:
        return len(self._map) if self._map is not None else 0

    def write(self, tensors: list[Any]) -> int | None:
        """The tensors at :func:`_shm_offsets` in the arena; its fd (the arena's: not to be closed),
        or None when they need more than ``max_bytes`` (the caller writes a fresh file)."""
        total = _shm_offsets([_nbytes(t) for t in tensors])[1]
        if total > self.max_bytes:
            return None
        if total > self.size:
            try:
                self._grow(total)
            except OSError:  # no sealable memfd here (a sandbox's filter): fresh files from now on
                self.max_bytes = 0
                return None
        assert self._map is not None
        _copy_into(self._map, tensors)
        return self.fd

    def _grow(self, total: int) -> None:
        size = min(max(total, 2 * self.size), self.max_bytes)
        self.close()
        fd = os.memfd_create("solbench-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self._map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a write in another thread still views it (a stop at a signal): freed after
                pass
            self._map = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _shm_read(fd: int, descs: list[tuple[str, tuple[int, ...], int]]) -> list[Any]:
    """Copy each described tensor out of the sender's file into a fresh CPU tensor."""
    import torch

    from solbench.data import torch_dtype

    info = os.fstat(fd)
    offsets, total = _shm_offsets([n for _, _, n in descs])
    if not stat.S_ISREG(info.st_mode) or info.st_size < total:
        raise ProtocolError(f"shared tensor file is not a regular file of at least {total} bytes")
    out = []
    for (dtype, shape, nbytes), off in zip(descs, offsets, strict=True):
        t = torch.empty(shape, dtype=torch_dtype(dtype))
        if nbytes:
            view = memoryview(t.reshape(-1).view(torch.uint8).numpy()).cast("B")
            done = 0
            while done < nbytes:
                got = os.preadv(fd, [view[done:]], off + done)
                if got <= 0:
                    raise ProtocolError("shared tensor file ended early")
                done += got
        out.append(t)
    return out


# --- sockets -----------------------------------------------------------------------------------

def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise WireTimeout("deadline passed")
    return left


def _sendall(sock: socket.socket, data: bytes | memoryview, deadline: float | None, fd: int | None = None) -> None:
    """Send all of ``data``; ``fd`` rides on the first bytes (SCM_RIGHTS)."""
    view = memoryview(data).cast("B")
    while view.nbytes:
        sock.settimeout(_remaining(deadline))
        try:
            if fd is not None:
                n = sock.sendmsg([view[: 1 << 24]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
                fd = None  # the receiver holds its own reference once sent
            else:
                n = sock.send(view[: 1 << 24])
        except TimeoutError:
            raise WireTimeout("deadline passed while sending") from None
        except (BrokenPipeError, ConnectionResetError) as err:
            raise WireClosed(f"connection closed while sending ({err.strerror})") from None
        view = view[n:]


def _recv_exact(sock: socket.socket, n: int, deadline: float | None, fds: list[int] | None = None) -> bytearray:
    """``n`` bytes; with ``fds``, also collect any file descriptors passed alongside them."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        sock.settimeout(_remaining(deadline))
        try:
            if fds is None:
                k = sock.recv_into(view[got:], min(n - got, 1 << 24))
            else:
                k, anc, _, _ = sock.recvmsg_into([view[got:]], socket.CMSG_SPACE(_MAX_FDS * 4),
                                                 socket.MSG_CMSG_CLOEXEC)
                for level, kind, data in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.extend(array.array("i", data[: len(data) - len(data) % 4]))
        except TimeoutError:
            raise WireTimeout("deadline passed while receiving") from None
        except ConnectionResetError:
            raise WireClosed("connection reset") from None
        if k == 0:
            raise WireClosed("connection closed")
        got += k
    return buf


def _json_default(x: Any) -> Any:
    if hasattr(x, "item") and callable(x.item):  # numpy / torch scalars
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x, key=str)
    return str(x)


def encode_header(header: dict[str, Any]) -> tuple[bytes, list[Any]]:
    """The JSON bytes of a header and the tensors that follow it (raises if it cannot be encoded).

    The header is marked ``"wire": "shm"`` when its tensors are large enough to travel in shared
    memory (:func:`send_message`)."""
    body, tensors = pack(header)
    body["tensors"] = [_describe(t) for t in tensors]
    if _in_shm(tensors):
        body["wire"] = "shm"
    return json.dumps(body, allow_nan=True, default=_json_default).encode("utf-8"), tensors


def send_message(sock: socket.socket, header: dict[str, Any], deadline: float | None = None) -> None:
    """Send a header (its tensors travel as raw frames, or in a shared-memory file when large)."""
    send_encoded(sock, *encode_header(header), deadline)


def send_encoded(sock: socket.socket, raw: bytes, tensors: list[Any], deadline: float | None = None,
                 arena: SendArena | None = None) -> None:
    """Send what :func:`encode_header` made of a header (large tensors through ``arena`` when given)."""
    if not _in_shm(tensors):
        _sendall(sock, _LEN.pack(len(raw)) + raw, deadline)
        for t in tensors:
            data = _tensor_bytes(t)
            _sendall(sock, _LEN.pack(data.nbytes), deadline)
            if data.nbytes:
                _sendall(sock, data, deadline)
        return
    fd = arena.write(tensors) if arena is not None else None
    if fd is not None:
        _sendall(sock, _LEN.pack(len(raw)) + raw, deadline, fd)
        return
    try:
        fd = _shm_write(tensors)
    except OSError as err:
        raise SharedFileError(err.errno, f"a {sum(_nbytes(t) for t in tensors)}-byte message's shared file: "
                                         f"{err.strerror or err}") from None
    try:
        _sendall(sock, _LEN.pack(len(raw)) + raw, deadline, fd)
    finally:
        os.close(fd)


def _read_frame(sock: socket.socket, limit: int, deadline: float | None, what: str) -> bytearray:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size, deadline))
    if n > limit:
        raise ProtocolError(f"{what} of {n} bytes exceeds the limit of {limit}")
    return _recv_exact(sock, n, deadline)


def _check_descriptor(d: Any) -> tuple[str, tuple[int, ...], int]:
    if not isinstance(d, dict) or d.get("dtype") not in ITEMSIZE or not isinstance(d.get("shape"), list):
        raise ProtocolError(f"bad tensor descriptor {str(d)[:200]}")
    shape = d["shape"]
    if len(shape) > 16 or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in shape):
        raise ProtocolError(f"bad tensor shape {str(shape)[:200]}")
    return d["dtype"], tuple(shape), math.prod(shape) * ITEMSIZE[d["dtype"]]


def _recv_header(sock: socket.socket, deadline: float | None, fds: list[int]) -> dict[str, Any]:
    """A message's JSON header, after its length; file descriptors that come with it are added to ``fds``."""
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size, deadline, fds))
    if n > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {n} bytes exceeds the limit of {MAX_HEADER_BYTES}")
    raw = _recv_exact(sock, n, deadline)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProtocolError(f"header is not JSON ({err})") from None
    if not isinstance(header, dict) or not isinstance(header.get("tensors", []), list):
        raise ProtocolError("header is not a JSON object with a tensor list")
    return header


def recv_message(sock: socket.socket, deadline: float | None = None, max_tensor_bytes: int = 1 << 40,
                 device: Any = None) -> dict[str, Any]:
    """Receive one message; tensors come back as CPU torch tensors. Raises a WireError subclass.

    ``device`` (a :mod:`solbench.worker.devwire` pool) reads the tensors of a message marked
    ``"wire": "cuda"``; without one such a message is a protocol error."""
    import torch

    from solbench.data import torch_dtype

    fds: list[int] = []
    try:
        header = _recv_header(sock, deadline, fds)
        descs = [_check_descriptor(d) for d in header.pop("tensors", [])]
        total = sum(nbytes for _, _, nbytes in descs)
        if total > max_tensor_bytes:
            raise ProtocolError(f"message carries {total} tensor bytes, more than the {max_tensor_bytes} expected")
        wire = header.pop("wire", None)
        if wire == "cuda":
            if device is None or len(fds) > 1:
                raise ProtocolError("a device-memory message on a channel without a device pool, or with many fds")
            return unpack(header, device.read(header.pop("pool", None), descs, fds[0] if fds else None))
        shm = wire == "shm"
        if len(fds) != (1 if shm else 0):
            raise ProtocolError(f"{len(fds)} file descriptors came with a message that needs {1 if shm else 0}")
        if shm:
            return unpack(header, _shm_read(fds[0], descs))
    finally:
        for fd in fds:
            os.close(fd)
    tensors = []
    for dtype, shape, nbytes in descs:
        buf = _read_frame(sock, nbytes, deadline, "tensor frame")
        if len(buf) != nbytes:
            raise ProtocolError(f"tensor frame of {len(buf)} bytes, its descriptor says {nbytes}")
        if nbytes == 0:
            tensors.append(torch.empty(shape, dtype=torch_dtype(dtype)))
        else:
            tensors.append(torch.frombuffer(buf, dtype=torch.uint8).view(torch_dtype(dtype)).reshape(shape))
    return unpack(header, tensors)
