"""Interleaved runs: the candidates A, B, A, B, ... per workload, with a cool-down between items."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from solbench.data import ResultRecord
from solbench.engine.options import RunOptions
from solbench.engine.runner import NullProgress, PlanItem, Progress, Runner
from solbench.errors import SolbenchError


class _Tag:
    """A record hook that puts the current ``tag`` in each record's ``timing["interleave"]``."""

    def __init__(self) -> None:
        self.tag: dict[str, Any] | None = None

    def __call__(self, record: ResultRecord, context: object) -> None:
        if self.tag is not None:
            record.timing["interleave"] = dict(self.tag)


class _OneTotal:
    """Forwards progress but the per-item ``begin``: the interleaved run announces its total once."""

    def __init__(self, progress: Progress):
        self.inner = progress

    def begin(self, total: int) -> None:
        pass

    def task(self, problem: str, workload: str, candidate: str) -> None:
        self.inner.task(problem, workload, candidate)

    def record(self, record: ResultRecord) -> None:
        self.inner.record(record)


def cooldown_between(device: str, max_wait_s: float) -> dict[str, Any]:
    """Wait for the GPU's power and clocks to recover (clockprobe.cooldown); nothing to wait for on the CPU."""
    if not device.startswith("cuda") or max_wait_s <= 0:
        return {"waited_s": 0.0, "recovered": None}
    import torch

    from solbench.timing import cooldown

    return cooldown(max_wait_s, device_index=torch.cuda.current_device())


def run_interleaved(plan: list[PlanItem], options: RunOptions, output: Path,
                    progress: Progress | None = None) -> Runner:
    """Per problem and workload, run the candidates A, B, A, B, ... ``options.interleave`` times, one
    fresh worker per item, waiting (at most ``options.cooldown_max_s``) for the GPU to cool down
    between items, so that power history (compute-bound times drift +-15% with it) does not favour
    whichever candidate runs second.

    One runner serves every item: one run id and one base seed, so every round sees the same inputs.
    Each record is appended as soon as it is made, tagged ``timing["interleave"]`` (a record hook).
    Returns the runner (its records, run id, spec).
    """
    rounds, cooldown_max_s = options.interleave, options.cooldown_max_s
    if rounds < 1:
        raise SolbenchError(f"--interleave {rounds}: give the number of A, B, ... rounds (1 or more)")
    progress = progress or NullProgress()
    tag = _Tag()
    runner = Runner(options, output, _OneTotal(progress), hooks=[tag])
    progress.begin(rounds * sum(len(item.workloads) * len(item.candidates) for item in plan))
    first = True
    for item in plan:
        order = [c.name for c in item.candidates]
        for workload in item.workloads:
            for r in range(1, rounds + 1):
                for candidate in item.candidates:
                    waited = 0.0 if first else cooldown_between(options.device, cooldown_max_s)["waited_s"]
                    first = False
                    tag.tag = {"round": r, "of": rounds, "order": order, "cooldown_s": round(waited, 3)}
                    runner.run([PlanItem(item.problem, [workload], [candidate])])
    return runner
