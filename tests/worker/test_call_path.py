"""One call path (solbench.timing.drive): rounds, timed calls and the memoization probe reach the
candidate through the same frames on the same thread; the worker carries out the parent's checks
of timed calls (edits between samples, kept outputs, the refresh run) and reports them."""

from __future__ import annotations

from pathlib import Path

import torch

from solbench.timing import drive
from solbench.worker.client import WorkerClient

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
EXPECT = [{"shape": [4, 8], "dtype": "float32"}]


def _honest(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.add(y, x, alpha=2)


def test_drive_sends_outputs_and_throws_exceptions_into_the_plan():
    def plan():
        got = yield (1, 2)
        try:
            yield (0, 0)
        except ZeroDivisionError:
            return got, "handled"

    assert drive(plan(), lambda a, b: a / b) == (0.5, "handled")


def test_every_phase_calls_run_from_the_same_frames_and_the_checks_come_back():
    g = torch.Generator().manual_seed(0)
    sets = [[torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)] for _ in range(3)]
    fresh = [torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)]
    verify = {"keep": [0, 4, 5000],
              "edits": [{"sample": 1, "set": 1, "input": 0, "index": torch.tensor([0, 5]),
                         "values": torch.tensor([3.0, 4.0])}],
              "refresh": {"set": 2, "inputs": fresh}}
    client = WorkerClient("cpu", reads=(str(CANDIDATES),))  # guards on: the memoization probe runs too
    client.spawn()
    client.wait_ready(300)
    try:
        assert client.request({"op": "load", "path": str(CANDIDATES / "records_callers.py"), "device": "cpu"},
                              60, 0) == {"ok": True, "setup": False}
        for args in sets[:2]:
            assert client.request({"op": "call", "inputs": args, "expect": EXPECT}, 60, 1 << 20)["ok"]
        config = {"budget_s": 0.02, "warmup_s": 0.0, "min_samples": 6}
        reply = client.request({"op": "time", "sets": sets, "expect": EXPECT, "config": config, "verify": verify},
                               60, 1 << 24)
        assert reply["ok"] is True, reply
        edited = sets[1][0].clone()
        edited.view(-1)[torch.tensor([0, 5])] = torch.tensor([3.0, 4.0])
        assert reply["samples"] >= 6 and [(k["sample"], k["set"]) for k in reply["kept"]] == [(0, 0), (4, 1)]
        assert torch.equal(reply["kept"][0]["outputs"][0]["data"], _honest(*sets[0]))
        assert torch.equal(reply["kept"][1]["outputs"][0]["data"], _honest(edited, sets[1][1]))
        assert reply["refresh"]["set"] == 2 and torch.equal(reply["refresh"]["outputs"][0]["data"], _honest(*fresh))
        # The harness's own edits and refresh are not the candidate's: the sets come back unchanged.
        assert all(v == {"kind": "unchanged"} for after in reply["sets_after"] for v in after)
        marker = client.request({"op": "call", "inputs": [torch.ones(1, 1), torch.ones(1, 1)],
                                 "expect": [{"shape": [1, 1], "dtype": "float32"}]}, 60, 1 << 20)
        assert marker["outputs"][0]["data"].item() == 1.0  # one caller stack, one thread, in every phase
    finally:
        client.close()
