"""The device route on a GPU: a CUDA VMM pool exported to another process (another user too), a
worker fed through it, and input mutation seen by the parent from the pool (skipped without CUDA)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import solbench
from solbench.engine.correctness import mutated_inputs
from solbench.guards.account import resolve_account
from solbench.worker.client import WorkerClient
from solbench.worker.wire import ProtocolError

HERE = Path(__file__).resolve().parents[1]
ROOT, CANDIDATES, TINY = HERE.parent, HERE / "candidates", HERE / "fixtures" / "tiny"


def _bindings() -> bool:
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
              pytest.mark.skipif(not _bindings(), reason="needs cuda-bindings")]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a child as nobody)")

# Imports the parent's allocation from an inherited fd, reports what it reads, doubles it in place.
_CHILD = r"""
import os, sys, torch
from solbench.worker import vmm
fd, size, n = map(int, sys.argv[1:4])
torch.cuda.set_device(0)
mapping = vmm.open_fd(fd, size, 0)
os.close(fd)
t = mapping.tensor(0, 4 * n).view(torch.float32)
print("SUM", float(t.double().sum()), "UID", os.geteuid())
t.mul_(2)
torch.cuda.synchronize()
mapping.close()
"""


def _child(fd: int, size: int, n: int, nobody: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME="/tmp", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    user = {"user": 65534, "group": 65534, "extra_groups": []} if nobody else {}
    return subprocess.run([sys.executable, "-c", _CHILD, str(fd), str(size), str(n)], pass_fds=[fd], env=env,
                          capture_output=True, text=True, timeout=120, check=False, **user)


@pytest.mark.parametrize("nobody", [False, pytest.param(True, marks=as_root)], ids=["same-user", "nobody"])
def test_pool_exported_by_fd_is_read_and_written_by_another_process(nobody):
    from solbench.worker import vmm

    mapping, fd = vmm.create(1 << 20, 0)
    try:
        n = 4096
        assert int(mapping.tensor().count_nonzero()) == 0, "a new pool is zeroed"
        x = torch.arange(n, dtype=torch.float32, device="cuda")
        mapping.tensor(0, 4 * n).view(torch.float32).copy_(x)
        torch.cuda.synchronize()
        done = _child(fd, mapping.size, n, nobody)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"SUM {float(x.double().sum())} UID {65534 if nobody else os.geteuid()}" in done.stdout
        assert torch.equal(mapping.tensor(0, 4 * n).view(torch.float32), x * 2), "the child's writes are seen"
    finally:
        os.close(fd)
        mapping.close()


def _worker(candidate: str, nobody: bool) -> WorkerClient:
    account = resolve_account("nobody") if nobody else None
    client = WorkerClient("cuda", reads=(str(CANDIDATES),), transport="device", account=account)
    client.spawn()
    client.wait_ready(180)
    reply = client.request({"op": "load", "path": str(CANDIDATES / candidate), "device": "cuda"}, 180, 0)
    assert reply["ok"] is True, reply
    assert client.transport == "device", client.transport_note
    return client


def _call(client: WorkerClient, x: torch.Tensor, y: torch.Tensor) -> dict:
    expect = [{"shape": list(x.shape), "dtype": "float32"}]
    reply = client.request({"op": "call", "inputs": [x, y], "expect": expect}, 120, 64 << 20)
    assert reply["ok"] is True, reply
    return reply


@pytest.mark.parametrize("nobody", [False, pytest.param(True, marks=as_root)], ids=["same-user", "nobody"])
def test_worker_fed_through_the_pool_returns_outputs_on_the_device(nobody):
    client = _worker("honest.py", nobody)
    try:
        assert not nobody or client.sandbox.get("uid") == 65534
        x, y = torch.randn(256, 1024, device="cuda"), torch.randn(256, 1024, device="cuda")
        reply = _call(client, x, y)
        out = reply["outputs"][0]["data"]
        assert out.is_cuda and torch.equal(out, torch.add(y, x, alpha=2))
        after = reply["inputs_after"]
        assert all(t.is_cuda for t in after) and torch.equal(after[0], x) and torch.equal(after[1], y)
        assert mutated_inputs({"x": x, "y": y}, after) == []
        assert client.pool is not None and after[0].data_ptr() != x.data_ptr(), "parent copies, not the pool"
    finally:
        client.discard()


def test_input_mutation_is_seen_by_the_parent_on_the_device_and_its_copy_stays_intact():
    client = _worker("mutates_input.py", nobody=False)
    try:
        x, y = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda") + 3
        reply = _call(client, x, y)
        assert mutated_inputs({"x": x, "y": y}, reply["inputs_after"]) == ["y"]
        assert int(reply["inputs_after"][1].count_nonzero()) == 0  # what the candidate did to its copy
        assert int(y.count_nonzero()) == y.numel()  # the parent's pristine copy is its own memory
    finally:
        client.discard()


def test_a_reply_may_name_each_shared_input_once():
    from solbench.worker.devwire import ParentPool

    pool = ParentPool(torch.cuda.current_device())
    a, b = socket.socketpair()
    try:
        pool.send(a, {"op": "call", "inputs": [torch.ones(8, device="cuda")], "expect": []}, None)
        assert torch.equal(pool.resolve({"x": {"$shared": 0}})["x"], torch.ones(8, device="cuda"))
        with pytest.raises(ProtocolError, match="named twice"):
            pool.resolve([{"$shared": 0}, {"$shared": 0}])
        with pytest.raises(ProtocolError, match="bad shared tensor reference"):
            pool.resolve({"$shared": 1})
    finally:
        a.close()
        b.close()
        pool.close()


def test_engine_gives_the_same_verdicts_by_either_route(tmp_path):
    verdicts = {}
    for route in ("memfd", "device"):
        result = solbench.run_problems([TINY / "scaled_add"], [CANDIDATES / "honest.py", CANDIDATES / "mutates_input.py"],
                                       device="cuda", transport=route, budget_s=0.05, seed=7, workloads=["n32", "n131072"],
                                       output=tmp_path / f"{route}.jsonl")
        verdicts[route] = [(r.solution, r.workload, r.status) for r in result.records]
        assert {r.harness["transport"] for r in result.records} == {route}
    assert verdicts["device"] == verdicts["memfd"]
    assert ("honest", "n131072", "PASSED") in verdicts["device"]
    assert ("mutates_input", "n32", "INCORRECT") in verdicts["device"]
