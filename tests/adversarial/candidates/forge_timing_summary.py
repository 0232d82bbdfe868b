"""Rewriting the worker's timing summary: once the timed samples are over (the memoization probe's
fresh inputs come after repeated ones), find the worker's TimingResult among the live objects and
set its median, p10, p90, min and mean to a tenth and its CI to zero, leaving the raw samples as
they were. The reply is encoded after the probe, so the parent receives the rewritten summary.

Computes honestly. Before the parent recomputed the statistics from the raw samples it took the
median on the worker's word: PASSED at a tenth of its time. Now every figure of the record is the
samples' (solbench.timing.restate): PASSED at its honest time, which the HONEST control checks.
"""

import gc

import torch

EXPECT = "PASSED"
HONEST = "honest_addmm"
PEERS = "24"
DEFENSE = "the parent recomputes median, percentiles, mean and CI from the raw samples (solbench.timing.restate)"
DEVICE = "any"

_seen: dict[tuple[int, ...], int] = {}
_state = {"repeated": False, "done": False}


def _rewrite_summaries() -> None:
    for obj in gc.get_objects():
        if type(obj).__name__ == "TimingResult" and getattr(obj, "median_s", 0) > 0:
            for name in ("median_s", "p10_s", "p90_s", "min_s", "mean_s"):
                setattr(obj, name, getattr(obj, name) / 10)
            obj.ci95_rel = 0.0


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    key = (attn.data_ptr(), weight.data_ptr(), residual.data_ptr())
    if key in _seen:
        _state["repeated"] = True  # the timing sets come back: the timed samples are running
    elif _state["repeated"] and not _state["done"]:  # new inputs after repeated ones: timing is over
        _state["done"] = True
        _rewrite_summaries()
    _seen[key] = _seen.get(key, 0) + 1
    return torch.addmm(residual, attn, weight.t())
