"""The device route's protocol on the CPU: layout, refusals and fallbacks (the GPU side: test_devshare.py)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

import solbench
from solbench.engine.options import resolve_transport
from solbench.worker.client import WorkerClient
from solbench.worker.devwire import ALIGN, WorkerPool, offsets, reply_area_bytes
from solbench.worker.wire import _LEN, ProtocolError, _sendall, recv_message

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def _raw(sock: socket.socket, body: dict) -> None:
    """A message as a hostile or mistaken sender could write it, header only."""
    data = json.dumps(body).encode()
    _sendall(sock, _LEN.pack(len(data)) + data, time.monotonic() + 5)


def test_offsets_are_aligned_and_never_overlap():
    sizes = [1, 0, ALIGN, ALIGN + 1, 3]
    places, total = offsets(sizes)
    assert all(p % ALIGN == 0 for p in places)
    for (a, n), b in zip(zip(places, sizes, strict=True), places[1:], strict=False):
        assert a + n <= b
    assert total == places[-1] + ALIGN and total % ALIGN == 0


def test_reply_area_holds_the_outputs_a_reply_can_carry():
    expect = [{"shape": [3, 5], "dtype": "float32"}, {"shape": [7], "dtype": "bfloat16"}]
    one = 60 + (ALIGN - 60) + 14 + (ALIGN - 14)  # each output rounded up to the alignment
    assert reply_area_bytes({"op": "call", "expect": expect}) == one
    sets = [[0], [1], [2]]
    timing = {"op": "time", "expect": expect, "sets": sets, "verify": {"keep": [1, 4]}}
    assert reply_area_bytes(timing) == one * (3 + 2 + 1)  # last per set, kept samples, the refresh run
    assert reply_area_bytes({"op": "load", "path": "x"}) == 0
    # The burst's pool is made by its prepare request, outside the parent's clock: room for its outputs
    # and its edits (per call: the indices and values of one input's edit, and the calls they go to).
    burst = {"op": "burst", "calls": 50, "expect": expect}
    prepare = {"op": "burst_prepare", "calls": 50, "expect": expect, "edit_bytes": 3 * ALIGN}
    assert reply_area_bytes(prepare) == reply_area_bytes(burst) + 3 * ALIGN


def test_a_device_message_without_a_pool_is_a_protocol_error():
    a, b = socket.socketpair()
    with a, b:
        _raw(a, {"op": "call", "tensors": [], "wire": "cuda", "pool": {"chunk": 1}})
        with pytest.raises(ProtocolError, match="without a device pool"):
            recv_message(b, time.monotonic() + 5)


def test_worker_pool_that_cannot_map_reports_it_and_hands_out_nothing_shared():
    pool = WorkerPool()
    pool.begin()
    got = pool.read({"chunk": 3}, [("float32", (2, 3), 24)], None)
    assert pool.error and "not mapped" in pool.error and not pool.serving
    assert got[0].shape == (2, 3) and got[0].device.type == "cpu"
    assert pool.index_of(got[0]) is None
    assert pool.status().startswith("memfd (")
    pool.begin()
    assert pool.error is None and not pool.active


def test_real_worker_answers_an_unmappable_device_request_and_the_client_falls_back():
    client = WorkerClient("cpu", reads=(str(CANDIDATES),))
    client.spawn()
    try:
        client.wait_ready(120)
        # A load offered with a pool the worker cannot map: the load goes on, the answer says memfd.
        client.transport = "device"
        _raw(client.sock, {"op": "load", "path": str(CANDIDATES / "honest.py"), "device": "cpu", "tensors": [],
                           "wire": "cuda", "pool": {"chunk": 1}})
        reply = client.receive(60, 0)
        assert reply["ok"] is True and "transport" not in reply
        assert client.transport == "memfd" and "could not map the shared device pool" in client.transport_note
        # A request whose tensors cannot be mapped fails as a request; the worker stays up.
        _raw(client.sock, {"op": "call", "tensors": [], "wire": "cuda", "pool": {"chunk": 1}})
        reply = client.receive(60, 1 << 20)
        assert reply["ok"] is False and "could not map the shared device pool" in reply["message"]
        import torch

        x, y = torch.randn(4, 8), torch.randn(4, 8)
        reply = client.request({"op": "call", "inputs": [x, y], "expect": [{"shape": [4, 8], "dtype": "float32"}]},
                               60, 1 << 20)
        assert torch.equal(reply["outputs"][0]["data"], torch.add(y, x, alpha=2))
    finally:
        client.discard()


def test_transport_setting_is_checked_in_one_line():
    with pytest.raises(solbench.SolbenchError, match="--transport device shares GPU memory"):
        solbench.RunOptions(device="cpu", transport="device")
    with pytest.raises(solbench.SolbenchError, match="transport"):
        solbench.RunOptions(device="cpu", transport="pcie")
    assert resolve_transport(solbench.RunOptions(device="cpu")) == ("memfd", None)
    assert resolve_transport(solbench.RunOptions(device="cpu", transport="memfd")) == ("memfd", None)


def test_device_route_end_to_end_over_a_simulated_pool(simulated_pool):
    """Parent pool -> worker views -> the worker's own call code -> reply area -> parent copies:
    outputs come back through the reply area, inputs are named, and the parent sees a mutation."""
    import torch

    import solbench.timing as timing
    from solbench.engine.correctness import mutated_inputs
    from solbench.worker.devwire import ParentPool
    from solbench.worker.main import Worker

    def run(x, y):
        out = torch.add(y, x, alpha=2)
        y.zero_()  # mutates an input: the parent must see it from the pool
        return out

    parent, pool = ParentPool(0), WorkerPool()
    worker = Worker(timing, None)
    worker.run, worker.pool = run, pool
    x, y = torch.randn(4, 8), torch.randn(4, 8) + 5
    a, b = socket.socketpair()
    with a, b:
        deadline = time.monotonic() + 10
        parent.send(a, {"op": "call", "inputs": [x, y], "expect": [{"shape": [4, 8], "dtype": "float32"}]}, deadline)
        pool.begin()
        msg = recv_message(b, deadline, device=pool)
        assert pool.serving and pool.index_of(msg["inputs"][1]) == 1
        assert msg["inputs"][0].untyped_storage().nbytes() == x.numel() * 4, "each input its own storage"
        encoded = pool.encode(worker.handle(msg))
        assert encoded[2] == "device" and b'"$shared": 1' in encoded[0]
        pool.send(b, encoded, deadline)
        reply = parent.resolve(recv_message(a, deadline, 1 << 20, device=parent))
    assert torch.equal(reply["outputs"][0]["data"], torch.add(y, x, alpha=2))
    after = reply["inputs_after"]
    assert torch.equal(after[0], x) and int(after[1].count_nonzero()) == 0
    assert mutated_inputs({"x": x, "y": y}, after) == ["y"]
    assert int(y.count_nonzero()) == y.numel(), "the parent's own copy is untouched"
    after[0].add_(1)  # the parent's copies are its own: writing one does not reach the pool
    assert torch.equal(parent.resolve({"$shared": 0}), x)


def test_reply_outside_its_area_or_with_an_fd_is_refused(simulated_pool):
    import os

    import torch

    from solbench.worker.devwire import ParentPool

    parent = ParentPool(0)
    a, b = socket.socketpair()
    with a, b:
        parent.send(a, {"op": "call", "inputs": [torch.ones(4)], "expect": [{"shape": [4], "dtype": "float32"}]}, None)
        big = [{"dtype": "float32", "shape": [1024]}]  # 4 KiB: more than the one-output reply area
        _raw(b, {"ok": True, "tensors": big, "wire": "cuda", "pool": {"chunk": parent.chunk}})
        with pytest.raises(ProtocolError, match="does not fit"):
            recv_message(a, time.monotonic() + 5, 1 << 20, device=parent)
        _raw(b, {"ok": True, "tensors": [], "wire": "cuda", "pool": {"chunk": parent.chunk + 1}})
        with pytest.raises(ProtocolError, match="names a device pool"):
            recv_message(a, time.monotonic() + 5, 1 << 20, device=parent)
        fd = os.memfd_create("x")
        try:
            data = json.dumps({"ok": True, "tensors": [], "wire": "cuda", "pool": {"chunk": parent.chunk}}).encode()
            _sendall(b, _LEN.pack(len(data)) + data, time.monotonic() + 5, fd)
        finally:
            os.close(fd)
        with pytest.raises(ProtocolError, match="may not carry a file descriptor"):
            recv_message(a, time.monotonic() + 5, 1 << 20, device=parent)


def test_timing_request_over_a_simulated_pool_returns_every_output_and_names_the_sets(simulated_pool):
    """The sets are the pool's own tensors (no worker copies, no mirror); the last, kept and refresh
    outputs fit the reply area; the sets come back named, the refreshed one holding the new data."""
    import torch

    import solbench.timing as timing
    from solbench.worker.devwire import ParentPool
    from solbench.worker.main import Worker

    worker = Worker(timing, None)
    worker.run, worker.pool = (lambda x, y: torch.add(y, x, alpha=2)), WorkerPool()
    parent = ParentPool(0)
    sets = [[torch.randn(16, 8), torch.randn(16, 8)] for _ in range(3)]
    fresh = [torch.randn(16, 8), torch.randn(16, 8)]
    expect = [{"shape": [16, 8], "dtype": "float32"}]
    header = {"op": "time", "sets": sets, "expect": expect,
              "config": {"device": "cpu", "budget_s": 0.02, "min_samples": 4, "max_samples": 8, "warmup_s": 0.0},
              "verify": {"keep": [0, 2], "edits": [], "refresh": {"set": 1, "inputs": fresh}}}
    a, b = socket.socketpair()
    with a, b:
        deadline = time.monotonic() + 30
        parent.send(a, header, deadline)
        worker.pool.begin()
        msg = recv_message(b, deadline, device=worker.pool)
        encoded = worker.pool.encode(worker.handle(msg))
        assert encoded[2] == "device", "the timing reply fits its area"
        worker.pool.send(b, encoded, deadline)
        reply = parent.resolve(recv_message(a, deadline, 1 << 24, device=parent))
    assert reply["ok"] is True, reply
    f = lambda x, y: torch.add(y, x, alpha=2)  # noqa: E731
    after = reply["sets_after"]
    assert torch.equal(after[0][0], sets[0][0]) and torch.equal(after[2][1], sets[2][1])
    assert torch.equal(after[1][0], fresh[0]) and torch.equal(after[1][1], fresh[1]), "the refresh wrote the pool"
    assert torch.equal(reply["refresh"]["outputs"][0]["data"], f(*fresh))
    for i, outs in enumerate(reply["last_outputs"]):  # the last timed call on each set, before the refresh
        assert outs is None or torch.equal(outs[0]["data"], f(*sets[i]))
    assert [k["sample"] for k in reply["kept"]] == [0, 2]
    assert torch.equal(reply["kept"][0]["outputs"][0]["data"], f(*sets[0]))


def _timed_worker_and_parent():
    """A worker serving ``f`` over the simulated device route, its parent's pool, two sets and a timing request."""
    import torch

    import solbench.timing as timing
    from solbench.worker.devwire import ParentPool
    from solbench.worker.main import Worker

    f = lambda x, y: torch.add(y, x, alpha=2)  # noqa: E731
    worker = Worker(timing, None)
    worker.run, worker.pool = f, WorkerPool()
    sets = [[torch.randn(64, 32), torch.randn(64, 32)] for _ in range(2)]
    expect = [{"shape": [64, 32], "dtype": "float32"}]
    timing_request = {"op": "time", "sets": sets, "expect": expect,
                      "config": {"device": "cpu", "budget_s": 0.02, "min_samples": 4, "max_samples": 8, "warmup_s": 0.0}}
    return f, worker, ParentPool(0), sets, expect, timing_request


def _serve(worker, parent, headers, chunks=None):
    """Each request sent by the parent's pool and served by the worker in turn; the replies (each ok), and
    the pool's chunk after each send in ``chunks``."""
    a, b = socket.socketpair()
    replies = []
    with a, b:
        deadline = time.monotonic() + 30
        for header in headers:
            parent.send(a, header, deadline)
            if chunks is not None:
                chunks.append(parent.chunk)
            worker.pool.begin()
            msg = recv_message(b, deadline, device=worker.pool)
            handler = worker.burst_prepare if header["op"] == "burst_prepare" else worker.handle
            worker.pool.send(b, worker.pool.encode(handler(msg)), deadline)
            replies.append(parent.resolve(recv_message(a, deadline, 1 << 24, device=parent)))
            assert replies[-1]["ok"] is True, replies[-1]
    return replies


def test_a_burst_after_a_timing_over_the_pool_runs_on_the_timed_sets_not_on_what_the_pool_holds_next(simulated_pool):
    """The burst's request (its edits) is copied into the same pool as the timing's sets: the worker's
    burst must run on copies of the sets as the timing left them (H200, 2026-12-02: honest SDPA and
    scaled_mm candidates were INCORRECT or hit illegal memory accesses in their bursts)."""
    import torch

    f, worker, parent, sets, expect, timing_request = _timed_worker_and_parent()
    calls = 2
    # No edits at all: every call's output is f of its timed set. The request (small enough for the
    # same pool) has a tensor that covers the first set's place in the pool with its values.
    filler = torch.full((2, 64, 32), 1e6)
    burst = {"op": "burst", "calls": calls, "expect": expect,
             "edits": [{"input": 0, "calls": torch.zeros(0, dtype=torch.int64),
                        "index": torch.zeros(0, 1, dtype=torch.int64), "values": torch.zeros(0, 1)}],
             "filler": filler}
    reply = _serve(worker, parent, [timing_request, {"op": "burst_prepare", "calls": calls, "expect": expect}, burst])[-1]
    assert parent.chunk == 1, "the same pool"
    assert bool((parent.mapping.tensor(0, filler.numel() * 4).view(torch.float32) == 1e6).all()), "overwritten"
    stacked = reply["stacked"][0]
    for c in range(calls):
        assert torch.equal(stacked[c], f(*sets[c % 2])), c


def test_a_device_pool_short_of_memory_is_retried_within_an_attempt_and_memfd_outside_one(monkeypatch):
    """Within a record's attempt (``memory_retried``) a pool the parent cannot make for lack of device
    memory raises DeviceMemoryShort and keeps the device route (the record runs again with more memory);
    outside one, or for any other reason, the peer moves to memfd and the request still arrives."""
    from solbench.errors import DeviceMemoryShort
    from solbench.worker import devwire, vmm
    from solbench.worker.client import memory_retried

    why = {"text": "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY"}

    def short(self, sock, header, deadline):
        raise vmm.DeviceShareError(why["text"])

    monkeypatch.setattr(devwire.ParentPool, "send", short)
    monkeypatch.setattr(devwire, "device_index", lambda device: 0)
    a, b = socket.socketpair()
    with a, b:
        for text, retried, moved in (("cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY", True, False),
                                     ("filling the device pool: CUDA out of memory. Tried to allocate 2 GiB", True, False),
                                     ("cuMemCreate failed: CUDA_ERROR_NOT_SUPPORTED", True, True),
                                     ("cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY", False, True)):
            why["text"] = text
            client = WorkerClient("cuda", transport="device")
            client.sock = a
            with memory_retried(retried):
                if not moved:
                    with pytest.raises(DeviceMemoryShort, match="device pool"):
                        client._send({"op": "ping"}, time.monotonic() + 5)
                    assert client.transport == "device"
                    continue
                client._send({"op": "ping", "n": 1}, time.monotonic() + 5)
            assert client.transport == "memfd" and text in client.transport_note
            assert recv_message(b, time.monotonic() + 5) == {"op": "ping", "n": 1}


def test_a_reply_whose_shared_file_cannot_be_made_is_a_failure_reply_not_a_dead_worker(monkeypatch):
    """The memfd route's file past the worker's file-size limit (EFBIG: an H200 timing reply of 8+ GiB
    after the device pool could not be made) raises before anything is sent; the worker answers that
    request with a failure that says why, and serves the next one."""
    import errno
    import threading

    import torch

    import solbench.timing as timing
    from solbench.worker import wire
    from solbench.worker.main import Worker, serve
    from solbench.worker.wire import send_message

    real = wire._shm_write
    calls = {"n": 0}

    def too_large_once(tensors):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EFBIG, "File too large")
        return real(tensors)

    monkeypatch.setattr(wire, "_shm_write", too_large_once)
    worker = Worker(timing, None)
    worker.run = lambda x: x.repeat(64, 1)  # 2 MiB of output: the reply goes by a shared file
    a, b = socket.socketpair()
    server = threading.Thread(target=serve, args=(b, worker), daemon=True)
    server.start()
    with a, b:
        deadline = time.monotonic() + 30
        assert recv_message(a, deadline)["op"] == "hello"
        x = torch.randn(128, 64)
        header = {"op": "call", "inputs": [x], "expect": [{"shape": [8192, 64], "dtype": "float32"}]}
        send_message(a, header, deadline)
        reply = recv_message(a, deadline, 1 << 30)
        assert reply["ok"] is False and "could not send its reply by memfd" in reply["message"]
        assert "2097152-byte message's shared file: File too large" in reply["message"]
        send_message(a, header, deadline)
        reply = recv_message(a, deadline, 1 << 30)
        assert reply["ok"] is True and torch.equal(reply["outputs"][0]["data"], x.repeat(64, 1))
        send_message(a, {"op": "exit"}, deadline)
        server.join(10)
    assert not server.is_alive()


class _FakeMapping:
    def __init__(self, size: int):
        self.size, self.closed = size, 0

    def close(self) -> None:
        self.closed += 1


class _FakeParentPool:
    def __init__(self, size: int):
        self.mapping, self.closed = _FakeMapping(size), 0

    def close(self) -> None:
        self.closed += 1

    def resolve(self, reply):
        return reply


def test_worker_pool_close_lets_go_of_its_mapping_and_the_next_request_needs_a_new_pool():
    pool = WorkerPool()
    mapping = _FakeMapping(1 << 30)
    pool.mapping, pool.chunk = mapping, 4
    pool.close()
    assert mapping.closed == 1 and pool.mapping is None and pool.chunk is None
    pool.begin()
    pool.read({"chunk": 4}, [("float32", (2,), 8)], None)  # the old chunk is gone: refused, not served
    assert pool.error and "not mapped" in pool.error


def test_between_records_a_large_pool_goes_back_worker_first_and_a_small_one_is_kept():
    """The worker answers ``release`` (its mapping and cache back), then the parent lets go of its side; a pool
    up to SHRINK_BELOW is kept (no round trip for small records)."""
    from solbench.worker.devwire import SHRINK_BELOW

    client = WorkerClient("cpu", reads=(str(CANDIDATES),))
    client.spawn()
    try:
        client.wait_ready(120)
        small = client.pool = _FakeParentPool(SHRINK_BELOW)
        assert client.release_pool(30) is False and client.pool is small and small.closed == 0
        big = client.pool = _FakeParentPool(SHRINK_BELOW + 1)
        assert client.release_pool(30) is True
        assert client.pool is None and big.closed == 1
        client.send({"op": "ping"}, 30)  # the worker is still serving
        assert client.receive(30, 0) == {"ok": True}
    finally:
        client.close()


def test_pool_bytes_is_a_requests_tensors_aligned_and_its_reply_area():
    import torch

    from solbench.worker.devwire import pool_bytes

    expect = [{"shape": [4, 8], "dtype": "float32"}]
    sets = [[torch.zeros(3), torch.zeros(100, dtype=torch.int64)], [torch.zeros(3), torch.zeros(100, dtype=torch.int64)]]
    timing = {"op": "time", "expect": expect, "sets": sets, "verify": {"keep": [0]}}
    tensors = offsets([12, 800, 12, 800])[1]
    assert tensors == 2 * (ALIGN + 2 * ALIGN)  # each rounded up to its own aligned place (800 bytes: two)
    assert pool_bytes(timing) == tensors + reply_area_bytes(timing)
    assert pool_bytes({"op": "burst_prepare", "calls": 7, "expect": expect, "reply_room": 10 ** 6}) == 10 ** 6


def test_a_burst_room_made_before_the_timing_carries_the_timing_and_a_shorter_burst_in_one_pool(simulated_pool):
    """The first burst's room is made before its timing's window for the most calls a claim can ask for,
    with the pool sized for the timing request too: neither the timing nor the burst makes a new pool (a
    new shared mapping inside the window), and a burst of fewer calls returns its own rows only."""
    import torch

    from solbench.worker.devwire import pool_bytes

    f, worker, parent, sets, expect, timing_request = _timed_worker_and_parent()
    prepare = {"op": "burst_prepare", "calls": 5, "expect": expect, "edit_bytes": ALIGN}
    prepare["reply_room"] = max(pool_bytes(dict(prepare)), pool_bytes(timing_request))
    assert pool_bytes(timing_request) > pool_bytes({k: v for k, v in prepare.items() if k != "reply_room"})
    calls = 3
    burst = {"op": "burst", "calls": calls, "expect": expect,
             "edits": [{"input": 0, "calls": torch.zeros(0, dtype=torch.int64),
                        "index": torch.zeros(0, 1, dtype=torch.int64), "values": torch.zeros(0, 1)}]}
    chunks: list[int] = []
    reply = _serve(worker, parent, [prepare, timing_request, burst], chunks)[-1]
    assert chunks == [1, 1, 1], "one pool, made by the room request"
    stacked = reply["stacked"][0]
    assert stacked.shape == (calls, 64, 32)
    for c in range(calls):
        assert torch.equal(stacked[c], f(*sets[c % 2])), c


def test_a_new_pool_leaves_no_object_viewing_the_old_one(simulated_pool):
    """When a new, larger pool replaces the old one, nothing the garbage collector can list (garbage not yet
    collected included: a finished call's inputs held in a cycle) still views the old pool, which is unmapped:
    a candidate walking gc's objects would read unmapped device memory (H200, 2026-12-03: super_batch)."""
    import gc

    import torch

    f, worker, parent, sets, expect, timing_request = _timed_worker_and_parent()
    _serve(worker, parent, [{"op": "call", "inputs": sets[0], "expect": expect}])
    base, size = worker.pool.mapping.tensor(0, 1).data_ptr(), worker.pool.mapping.size
    old = worker.pool.mapping

    def viewing_old() -> list[tuple[int, ...]]:
        return [tuple(x.shape) for o in gc.get_objects() if type(o) in (list, tuple, dict)
                for x in (o.values() if type(o) is dict else o)
                if type(x) is torch.Tensor and x.numel() and base <= x.data_ptr() < base + size]

    assert viewing_old(), "the control: the call's inputs outlive it, in garbage"
    _serve(worker, parent, [{"op": "burst_prepare", "calls": 5, "expect": expect, "reply_room": 10 * size}])
    assert old.closed and worker.pool.mapping is not old
    assert viewing_old() == []
