"""Work items: one (problem, candidate) and its workloads, as data an executor can receive; longest first."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from solbench.data import Problem, Workload
from solbench.engine import PlanItem
from solbench.errors import SolbenchError

# A workload's fixed costs (worker calls, correctness rounds, the timing budget) counted as bytes
# moved, so that an item of many small workloads is not scheduled as if it were free.
FIXED_BYTES_PER_WORKLOAD = 64 << 20


@dataclass(frozen=True)
class WorkItem:
    """One candidate on one problem's workloads: what an executor runs with one call of the engine."""

    index: int
    problem_path: str  # the problem.yaml; every executor loads the problem itself
    problem: str
    workloads: tuple[str, ...]
    candidate_path: str
    candidate: str  # the name the plan gave it (unique within the run)
    candidate_sha256: str
    estimate_bytes: int = 0
    # The message of the item the driver expects to give this executor next (its workers are
    # started ahead during this one); a hint only: whatever comes next is what runs.
    ahead: dict[str, Any] | None = None

    def as_message(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> WorkItem:
        fields = dict(message)
        fields["workloads"] = tuple(fields["workloads"])
        return cls(**fields)

    def only(self, workloads: list[str]) -> WorkItem:
        """The same item on a subset of its workloads (what is left of it after a lost executor)."""
        return replace(self, workloads=tuple(w for w in self.workloads if w in workloads))


def estimated_bytes(problem: Problem, workloads: list[Workload]) -> int:
    """Bytes the harness moves for these workloads (inputs and outputs), plus each workload's fixed cost."""
    return sum(problem.auto_bytes(problem.resolve_axes(w)) + FIXED_BYTES_PER_WORKLOAD for w in workloads)


def split_plan(plan: list[PlanItem]) -> list[WorkItem]:
    """One item per (problem, candidate), the largest estimated work first (plan order among equals)."""
    items = []
    for entry in plan:
        if entry.problem.path is None:
            raise SolbenchError(f"problem {entry.problem.name} was built in memory: executors load a problem from "
                                "its problem.yaml, so save it to a folder and pass that")
        estimate = estimated_bytes(entry.problem, entry.workloads)
        names = tuple(w.name for w in entry.workloads)
        for c in entry.candidates:
            items.append(WorkItem(0, str(entry.problem.path.resolve()), entry.problem.name, names, str(c.path),
                                  c.name, c.sha256, estimate))
    items.sort(key=lambda item: -item.estimate_bytes)  # stable: equals keep the plan's order
    return [replace(item, index=i) for i, item in enumerate(items)]


def record_key(run_id: str | None, problem: str, workload: str, candidate: str) -> tuple[str, str, str, str]:
    """What makes a record unique in a run: written once, whatever retries happen."""
    return (run_id or "", problem, workload, candidate)
