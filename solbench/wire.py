"""The byte format between the parent and a worker: framed JSON headers plus raw tensor bytes.

Nothing here unpickles: the parent reads untrusted bytes from a worker that runs candidate code,
and ``pickle.loads`` on those bytes would run code in the parent. A message is

    frame(header JSON)  frame(tensor 0 bytes)  frame(tensor 1 bytes)  ...

where a frame is an 8-byte little-endian length followed by that many bytes. The header is a JSON
object whose ``"tensors"`` list describes each tensor frame (``dtype``, ``shape``); inside the
header a tensor is referenced as ``{"$tensor": i}``. Every frame is checked against its
description and against the caller's byte budget before it is read, and every read has a deadline.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from typing import Any

from .dtypes import ITEMSIZE

_LEN = struct.Struct("<Q")
MAX_HEADER_BYTES = 16 << 20


class WireError(Exception):
    """Base class: the connection cannot be used any more."""


class WireTimeout(WireError):
    """The deadline passed before a whole message arrived (or could be sent)."""


class WireClosed(WireError):
    """The other side closed the connection (it exited or was killed)."""


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


# --- sockets -----------------------------------------------------------------------------------

def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise WireTimeout("deadline passed")
    return left


def _sendall(sock: socket.socket, data: bytes | memoryview, deadline: float | None) -> None:
    view = memoryview(data).cast("B")
    while view.nbytes:
        sock.settimeout(_remaining(deadline))
        try:
            n = sock.send(view[: 1 << 24])
        except TimeoutError:
            raise WireTimeout("deadline passed while sending") from None
        except (BrokenPipeError, ConnectionResetError) as err:
            raise WireClosed(f"connection closed while sending ({err.strerror})") from None
        view = view[n:]


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        sock.settimeout(_remaining(deadline))
        try:
            k = sock.recv_into(view[got:], min(n - got, 1 << 24))
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
    """The JSON bytes of a header and the tensors that follow it (raises if it cannot be encoded)."""
    body, tensors = pack(header)
    body["tensors"] = [_describe(t) for t in tensors]
    return json.dumps(body, allow_nan=True, default=_json_default).encode("utf-8"), tensors


def send_message(sock: socket.socket, header: dict[str, Any], deadline: float | None = None) -> None:
    """Send a header (any tensors in it travel as raw frames)."""
    raw, tensors = encode_header(header)
    _sendall(sock, _LEN.pack(len(raw)) + raw, deadline)
    for t in tensors:
        data = _tensor_bytes(t)
        _sendall(sock, _LEN.pack(data.nbytes), deadline)
        if data.nbytes:
            _sendall(sock, data, deadline)


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


def recv_message(sock: socket.socket, deadline: float | None = None, max_tensor_bytes: int = 1 << 40) -> dict[str, Any]:
    """Receive one message; tensors come back as CPU torch tensors. Raises a WireError subclass."""
    import torch

    from .dtypes import torch_dtype

    raw = _read_frame(sock, MAX_HEADER_BYTES, deadline, "header")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProtocolError(f"header is not JSON ({err})") from None
    if not isinstance(header, dict) or not isinstance(header.get("tensors", []), list):
        raise ProtocolError("header is not a JSON object with a tensor list")
    descs = [_check_descriptor(d) for d in header.pop("tensors", [])]
    total = sum(nbytes for _, _, nbytes in descs)
    if total > max_tensor_bytes:
        raise ProtocolError(f"message carries {total} tensor bytes, more than the {max_tensor_bytes} expected")
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
