"""solbench.worker.wire (the byte format) and solbench.worker.main / worker_client (a real worker process)."""

from __future__ import annotations

import array
import json
import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
import torch

from solbench.worker.client import WorkerClient, WorkerFailure, describe_exit
from solbench.worker.wire import (
    SHM_MIN_BYTES,
    ProtocolError,
    WireClosed,
    WireError,
    WireTimeout,
    pack,
    recv_message,
    send_message,
    unpack,
)

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def _roundtrip(header: dict, max_bytes: int = 1 << 30) -> dict:
    a, b = socket.socketpair()

    def send() -> None:
        try:
            send_message(a, header, time.monotonic() + 30)
        except WireError:  # the receiver gave up (the budget test)
            pass

    t = threading.Thread(target=send)
    t.start()
    try:
        return recv_message(b, time.monotonic() + 30, max_tensor_bytes=max_bytes)
    finally:
        b.close()
        t.join()
        a.close()


@pytest.mark.parametrize("tensor", [
    torch.randn(3, 5, dtype=torch.bfloat16),
    torch.randn(2, 3).to(torch.float8_e4m3fn),
    torch.tensor([True, False, True]),
    torch.arange(-5, 5, dtype=torch.int64),
    torch.tensor(3.5, dtype=torch.float64),  # 0-dim
    torch.empty(0, 4, dtype=torch.float16),
    torch.randn(4, 6).t(),  # not contiguous
    torch.randn(1 << 20),  # larger than one socket buffer
], ids=["bf16", "fp8", "bool", "int64", "scalar", "empty", "transposed", "4MiB"])
def test_tensor_roundtrip_is_bit_exact(tensor):
    got = _roundtrip({"op": "x", "t": tensor})["t"]
    assert got.dtype == tensor.dtype and tuple(got.shape) == tuple(tensor.shape)
    flat = tensor.contiguous().reshape(-1)
    if flat.numel():
        assert torch.equal(got.reshape(-1).view(torch.uint8), flat.view(torch.uint8))


def test_large_messages_travel_in_shared_memory_bit_exact():
    big = torch.randn(300_000)  # with the rest: past SHM_MIN_BYTES, so a memfd carries them
    parts = [big, torch.randn(3, 5, dtype=torch.bfloat16), torch.tensor(2.5, dtype=torch.float64),
             torch.empty(0, 3), torch.randn(7, 9).t(), torch.tensor([True, False, True]),
             torch.arange(-9, 9, dtype=torch.int64)]
    assert sum(p.numel() * p.element_size() for p in parts) >= SHM_MIN_BYTES
    got = _roundtrip({"op": "x", "parts": parts, "n": 4})
    assert got["n"] == 4 and "wire" not in got
    for want, have in zip(parts, got["parts"], strict=True):
        assert have.dtype == want.dtype and tuple(have.shape) == tuple(want.shape) and have.is_contiguous()
        if want.numel():
            assert torch.equal(have.reshape(-1).view(torch.uint8), want.contiguous().reshape(-1).view(torch.uint8))
    # The receiver's tensors are its own memory: writable, and independent of the sender's.
    got["parts"][0].zero_()
    assert big.abs().sum() > 0


def _send_with_fd(a: socket.socket, header: bytes, fd: int) -> None:
    a.sendmsg([struct.pack("<Q", len(header))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    a.sendall(header)


@pytest.mark.parametrize("case", ["fd_without_shm", "shm_without_fd", "pipe", "short_file"])
def test_shared_memory_protocol_violations_are_protocol_errors(case):
    a, b = socket.socketpair()
    shm = json.dumps({"wire": "shm", "tensors": [{"dtype": "float32", "shape": [1024]}]}).encode()
    r, w = os.pipe()
    f = os.memfd_create("t")
    os.ftruncate(f, 100)  # 100 bytes where 4096 are described
    try:
        if case == "fd_without_shm":
            _send_with_fd(a, json.dumps({"op": "x"}).encode(), f)
        elif case == "shm_without_fd":
            _raw(a, shm)
        elif case == "pipe":
            _send_with_fd(a, shm, r)  # a pipe would block a read: it is refused before any
        else:
            _send_with_fd(a, shm, f)
        fds_before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(ProtocolError, match="file descriptor|regular file"):
            recv_message(b, time.monotonic() + 5)
        assert len(os.listdir("/proc/self/fd")) <= fds_before  # the received fd was closed
    finally:
        for fd in (r, w, f):
            os.close(fd)
        a.close()
        b.close()


def test_structures_and_non_finite_floats_roundtrip():
    x = torch.ones(2)
    got = _roundtrip({"a": [1, 2.5, None, "s", {"b": x}], "nan": float("nan"), "inf": float("inf")})
    assert got["a"][:4] == [1, 2.5, None, "s"] and torch.equal(got["a"][4]["b"], x)
    assert got["nan"] != got["nan"] and got["inf"] == float("inf")


def test_pack_unpack_references():
    obj, tensors = pack({"k": [torch.zeros(1), 3]})
    assert obj == {"k": [{"$tensor": 0}, 3]} and len(tensors) == 1
    with pytest.raises(ProtocolError):
        unpack({"$tensor": 5}, tensors)


def test_budget_is_enforced_before_reading():
    with pytest.raises(ProtocolError, match="more than"):
        _roundtrip({"t": torch.zeros(1000)}, max_bytes=100)


def _raw(a: socket.socket, header: bytes, frames: list[bytes] = ()) -> None:
    a.sendall(struct.pack("<Q", len(header)) + header)
    for f in frames:
        a.sendall(struct.pack("<Q", len(f)) + f)


@pytest.mark.parametrize("header, frames, fragment", [
    (b"not json", [], "not JSON"),
    (b"[1, 2]", [], "not a JSON object"),
    (json.dumps({"tensors": [{"dtype": "complex64", "shape": [1]}]}).encode(), [], "descriptor"),
    (json.dumps({"tensors": [{"dtype": "float32", "shape": [-1]}]}).encode(), [], "shape"),
    (json.dumps({"tensors": [{"dtype": "float32", "shape": [2]}]}).encode(), [b"\0" * 12], "exceeds"),
])
def test_malformed_messages_are_protocol_errors(header, frames, fragment):
    a, b = socket.socketpair()
    try:
        _raw(a, header, frames)
        with pytest.raises(ProtocolError, match=fragment):
            recv_message(b, time.monotonic() + 5)
    finally:
        a.close()
        b.close()


def test_deadline_and_closed_connection():
    a, b = socket.socketpair()
    t0 = time.monotonic()
    with pytest.raises(WireTimeout):
        recv_message(b, time.monotonic() + 0.2)
    assert time.monotonic() - t0 < 2
    a.sendall(struct.pack("<Q", 100) + b"{")  # a partial message, then silence: still bounded
    with pytest.raises(WireTimeout):
        recv_message(b, time.monotonic() + 0.2)
    a.close()
    with pytest.raises(WireClosed):
        recv_message(b, time.monotonic() + 5)
    b.close()


def test_describe_exit():
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-11) == "was killed by SIGSEGV (signal 11)"


# --- a real worker ------------------------------------------------------------------------------

def test_worker_session_load_call_errors_and_close():
    client = WorkerClient("cpu", reads=(str(CANDIDATES),))
    client.spawn()
    client.wait_ready(300)
    try:
        assert client.request({"op": "load", "path": str(CANDIDATES / "honest.py"), "device": "cpu"}, 60, 0) == \
            {"ok": True, "setup": False}
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        expect = [{"shape": [3, 4], "dtype": "float32"}]
        reply = client.request({"op": "call", "inputs": [x, y], "expect": expect}, 60, 1 << 20)
        assert reply["ok"] is True
        (out,) = reply["outputs"]
        assert out["exact"] and out["device"] == "cpu" and torch.equal(out["data"], y + 2 * x)
        # Inputs the call left bitwise unchanged are reported as such, not sent back.
        assert reply["inputs_after"] == [{"kind": "unchanged"}, {"kind": "unchanged"}]
        # A wrong expectation: the worker describes the output but does not send its values.
        reply = client.request({"op": "call", "inputs": [x, y], "expect": [{"shape": [4, 3], "dtype": "float32"}]},
                               60, 1 << 20)
        assert "data" not in reply["outputs"][0] and reply["outputs"][0]["shape"] == [3, 4]
        # The timer's one-time costs before a first window: nothing to build on the CPU
        assert client.request({"op": "prime", "config": {"device": "cpu"}}, 60, 0) == {"ok": True}
        reply = client.request({"op": "frobnicate"}, 60, 0)
        assert reply == {"ok": False, "kind": "protocol", "message": "unknown op 'frobnicate'"}
        # An exception inside run() is a reply, and the worker lives on.
        reply = client.request({"op": "call", "inputs": [x], "expect": expect}, 60, 1 << 20)
        assert reply["ok"] is False and reply["kind"] == "runtime" and "TypeError" in reply["message"]
        assert client.request({"op": "call", "inputs": [x, y], "expect": expect}, 60, 1 << 20)["ok"] is True
        pid = client.proc.pid
    finally:
        client.close()
    assert client.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_worker_timeout_kills_and_reports():
    client = WorkerClient("cpu", reads=(str(CANDIDATES),))
    client.spawn()
    client.wait_ready(300)
    try:
        client.request({"op": "load", "path": str(CANDIDATES / "hangs.py"), "device": "cpu"}, 60, 0)
        t0 = time.monotonic()
        with pytest.raises(WorkerFailure) as info:
            client.request({"op": "call", "inputs": [torch.ones(1), torch.ones(1)], "expect": []}, 1.0, 1 << 10)
        assert info.value.kind == "timeout" and time.monotonic() - t0 < 10
        assert client.returncode == -9 and not client.alive
        with pytest.raises(WorkerFailure, match="not running"):
            client.request({"op": "exit"}, 1, 0)
    finally:
        client.discard()


def test_each_worker_has_its_own_jit_caches(tmp_path):
    from solbench.worker.client import JIT_CACHE_VARS, _worker_env

    a, b = _worker_env(tmp_path / "a"), _worker_env(tmp_path / "b")
    for var in JIT_CACHE_VARS:
        assert Path(a[var]).is_relative_to(tmp_path / "a") and Path(b[var]).is_relative_to(tmp_path / "b")
    assert len({a[v] for v in JIT_CACHE_VARS}) == len(JIT_CACHE_VARS)


CREDENTIALS = {"DATABASE_URL": "postgres://app:hunter2@db/x", "GITHUB_PAT": "ghp_x", "OPENAI_KEY": "sk-x",
               "MYSQL_PWD": "pw", "PGPASS": "pw", "NPM_CONFIG__AUTH": "dXNlcjpwYXNz", "CI_JOB_JWT": "eyJ",
               "HTTPS_PROXY": "http://u:pass@proxy:3128", "SENTRY_DSN": "https://k@sentry.io/1",
               "TORCH_HUB_TOKEN": "x", "CUDA_PROXY": "http://u:pw@h"}
NEEDED = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "1",
          "NVIDIA_VISIBLE_DEVICES": "all", "TRITON_INTERPRET": "1", "TORCH_CUDA_ARCH_LIST": "9.0",
          "OMP_NUM_THREADS": "1"}


def test_worker_environment_is_an_allow_list(tmp_path, monkeypatch):
    from solbench.worker.client import _worker_env

    for var, value in {**CREDENTIALS, **NEEDED, "SOLBENCH_JIT_CACHE": "/x"}.items():
        monkeypatch.setenv(var, value)
    env = _worker_env(tmp_path)
    assert not set(CREDENTIALS) & set(env) and "SOLBENCH_JIT_CACHE" not in env
    assert {k: env[k] for k in NEEDED} == NEEDED
    assert not any("hunter2" in v or "pass@" in v for v in env.values())


def test_failure_message_keeps_the_first_line_and_the_last():
    from solbench.worker.main import _failure

    try:
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nsome detail\n"
                           "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    except RuntimeError as err:
        reply, line = _failure(err), err.__traceback__.tb_lineno
    # ... and where it was raised: the innermost frame outside solbench and the libraries (this file here)
    assert reply["message"].startswith("RuntimeError: CUDA error: an illegal memory access was encountered ... "
                                       "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions. (at ")
    assert reply["message"].endswith(f"test_worker.py:{line})")
    try:
        raise ValueError("one line")
    except ValueError as err:
        assert _failure(err)["message"] == f"ValueError: one line (at test_worker.py:{err.__traceback__.tb_lineno})"


def test_the_worker_gives_back_its_cached_device_memory_after_a_burst(monkeypatch):
    """A burst's output rows (up to 4 GiB) are cached by the worker's allocator once sent: the worker
    gives them back after the reply (other records in flight need the memory), and only then. Its reply
    goes into the file its burst_prepare made (solbench.worker.burst.reply_arena), dropped after it."""
    from solbench.worker import devwire
    from solbench.worker import main as worker_main
    from solbench.worker.wire import recv_message, send_message

    handled: list[str] = []
    released: list[list[str]] = []
    dropped: list[list[str]] = []
    arenas: list[object | None] = []

    class Fake:
        pool = None
        burst_buffers = None
        reply_arena: object | None = None

        def handle(self, msg):
            handled.append(msg["op"])
            if msg["op"] == "burst_prepare":
                self.reply_arena = object()  # what reply_arena made: the reply's tensors are too small to use it
            return {"ok": True, "stacked": [torch.zeros(4)]}

        def drop_reply_arena(self):
            dropped.append(list(handled))
            self.reply_arena = None

        load = call_setup = burst_prepare = release = prime = handle

    send = devwire.WorkerPool.send

    def recording_send(sock, encoded, deadline=None, arena=None):
        arenas.append(arena)
        send(sock, encoded, deadline, arena)

    monkeypatch.setattr(devwire.WorkerPool, "send", staticmethod(recording_send))
    monkeypatch.setattr(worker_main, "release_device_memory", lambda: released.append(list(handled)))
    a, b = socket.socketpair()
    done = threading.Thread(target=worker_main.serve, args=(b, Fake()), daemon=True)
    done.start()
    assert recv_message(a)["op"] == "hello"
    ops = ["call", "burst_prepare", "burst", "call", "time", "burst"]
    for op in ops:
        send_message(a, {"op": op})
        assert recv_message(a)["ok"] is True
    send_message(a, {"op": "exit"})
    done.join(5)
    assert released == [ops[:3], ops]  # right after each burst (its reply sent), after no other request
    assert dropped == released  # its reply's file too
    assert [a is not None for a in arenas] == [op == "burst" and i == 2 for i, op in enumerate(ops)]


def test_release_drops_the_workers_pool_burst_room_and_cached_memory(monkeypatch):
    """``release`` between records: the pool's mapping closed, the burst's room and last sets dropped, the
    allocator's cache emptied; the worker answers ok."""
    import solbench.worker.main as worker_main
    from solbench.worker.devwire import WorkerPool

    class Mapping:
        closed = 0

        def close(self):
            Mapping.closed += 1

    released = []
    monkeypatch.setattr(worker_main, "release_device_memory", lambda: released.append(True))
    worker = worker_main.Worker(timing=None)
    worker.pool = WorkerPool()
    worker.pool.mapping, worker.pool.chunk = Mapping(), 2
    worker.burst_buffers, worker.timed_sets = [[torch.zeros(2)]], [[torch.zeros(2)]]
    assert worker.release({"op": "release"}) == {"ok": True}
    assert Mapping.closed == 1 and worker.pool.mapping is None and worker.pool.chunk is None
    assert worker.burst_buffers is None and worker.timed_sets is None and released == [True]


def test_a_senders_arena_carries_message_after_message_in_one_sealed_file():
    """The memfd route's reusable file: two large messages arrive whole through one file (no new one
    for the second), the receiver cannot truncate it under the sender's mapping, and a message over
    the arena's cap goes in a fresh file."""
    import fcntl
    import os

    from solbench.worker.wire import SendArena, encode_header, send_encoded

    arena = SendArena(max_bytes=64 << 20)
    a, b = socket.socketpair()
    try:
        got, fds = [], []
        for i in range(3):
            x = torch.randn(SHM_MIN_BYTES // 4 * (3 if i < 2 else 40)) + i  # the third: 120 MiB, over the cap
            t = threading.Thread(target=lambda x=x: send_encoded(a, *encode_header({"x": x}), time.monotonic() + 30,
                                                                 arena=arena))
            t.start()
            got.append((x, recv_message(b, time.monotonic() + 30)["x"]))
            t.join()
            fds.append(arena.fd)
        assert all(torch.equal(sent, back) for sent, back in got)
        assert fds[0] == fds[1] == fds[2] and arena.size < 120 << 20  # the big one did not grow it
        seals = fcntl.fcntl(arena.fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW
        held = os.dup(arena.fd)  # what a receiver keeps
        try:
            with pytest.raises(PermissionError):
                os.ftruncate(held, 0)
        finally:
            os.close(held)
    finally:
        arena.close()
        a.close()
        b.close()
