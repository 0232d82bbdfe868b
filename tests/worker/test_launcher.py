"""A worker started under a launcher (as `solbench profile` starts one under ncu): it connects to a
socket in its folder instead of inheriting one, answers a ``profile`` request like a ``call``, and the
launcher is left to end on its own after the worker exits."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from solbench.worker.client import WorkerClient

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
LAUNCHER = (sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))")


def test_a_worker_under_a_launcher_profiles_one_call_and_exits():
    # A launcher that starts the worker as its child and waits for it, as ncu does
    client = WorkerClient("cpu", reads=(str(CANDIDATES),), launcher=LAUNCHER)
    client.spawn()
    try:
        client.wait_ready(300)
        assert client.worker_pid is not None and client.worker_pid != client.proc.pid
        assert client.request({"op": "load", "path": str(CANDIDATES / "honest.py"), "device": "cpu"}, 300, 0)["ok"]
        x, y = torch.arange(6.0).reshape(2, 3), torch.ones(2, 3)
        reply = client.request({"op": "profile", "inputs": [x, y], "expect": [{"shape": [2, 3], "dtype": "float32"}]},
                               60, 1 << 20)
        assert reply["ok"] is True, reply
        assert torch.equal(reply["outputs"][0]["data"], y + 2 * x)
        assert [a["kind"] for a in reply["inputs_after"]] == ["unchanged", "unchanged"]
        assert client.finish(30) == 0  # the launcher ended by itself once the worker exited
    finally:
        client.discard()


def test_a_worker_waited_for_long_after_its_start_timeout_is_read_not_killed():
    """A worker started ahead whose lane came for it later than the start timeout (the lane waited for
    memory) still gets its hello read: the deadline is the start timeout or a grace from now, whichever is later."""
    client = WorkerClient("cpu", reads=(str(CANDIDATES),))
    client.spawn()
    try:
        client.spawned_at -= 1000.0  # started 1000 s ago, as far as the deadline knows
        client.wait_ready(300)
        assert client.ready and client.proc.poll() is None
        assert client.request({"op": "load", "path": str(CANDIDATES / "honest.py"), "device": "cpu"}, 300, 0)["ok"]
    finally:
        client.discard()
