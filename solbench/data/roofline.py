"""Roofline math as pure functions.

T_compute = FLOPs / peak, T_memory = bytes / bandwidth, T_ideal = max of the two,
SOL = T_ideal / T_actual (1.0 = at the roofline).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from solbench.data.hardware import HardwareSpec
    from solbench.data.problem import Problem, Workload

Bound = Literal["compute", "memory"]


def t_compute(flops: float, peak_flops: float) -> float:
    return flops / peak_flops


def t_memory(nbytes: float, bandwidth: float) -> float:
    return nbytes / bandwidth


def t_ideal(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> float:
    return max(t_compute(flops, peak_flops), t_memory(nbytes, bandwidth))


def bound(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> Bound:
    """Which roof limits: compute when T_compute >= T_memory (ties go to compute)."""
    return "compute" if t_compute(flops, peak_flops) >= t_memory(nbytes, bandwidth) else "memory"


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOP per byte of minimal memory traffic (inf when no bytes move)."""
    return flops / nbytes if nbytes > 0 else float("inf")


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP/byte) where the compute roof meets the memory diagonal."""
    return peak_flops / bandwidth


def sol(t_ideal_s: float, t_actual_s: float) -> float:
    """Speed-of-light fraction. Above 1.0 means faster than the roofline allows."""
    if t_actual_s <= 0:
        raise ValueError(f"t_actual must be positive, got {t_actual_s}")
    return t_ideal_s / t_actual_s


@dataclass(frozen=True)
class AnchoredScore:
    score: float
    below_ideal: bool  # T_actual < T_ideal: physically impossible, clamped to 1
    baseline_not_slower: bool  # T_baseline <= T_ideal: the anchor is degenerate


def anchored_score(t_actual_s: float, t_ideal_s: float, t_baseline_s: float) -> AnchoredScore:
    """SOL-ExecBench's score S = 1 / (1 + (T - T_ideal) / (T_baseline - T_ideal)), clamped to [0, 1].

    S = 1 at the roofline, 0.5 at the baseline, toward 0 for slower candidates.
    """
    if t_actual_s <= 0 or t_ideal_s <= 0 or t_baseline_s <= 0:
        raise ValueError("times must be positive")
    below = t_actual_s < t_ideal_s
    if t_baseline_s <= t_ideal_s:
        return AnchoredScore(1.0 if t_actual_s <= t_ideal_s else 0.0, below, True)
    if below:
        return AnchoredScore(1.0, True, False)
    s = 1.0 / (1.0 + (t_actual_s - t_ideal_s) / (t_baseline_s - t_ideal_s))
    return AnchoredScore(min(1.0, max(0.0, s)), False, False)


@dataclass(frozen=True)
class RooflinePoint:
    """The roofline numbers of one workload on one GPU spec."""

    workload: str
    flops: int
    bytes: int
    arithmetic_intensity: float
    t_compute_s: float
    t_memory_s: float
    t_ideal_s: float
    bound: Bound
    compute_dtype: str
    peak_flops: float
    memory_bandwidth: float
    ridge_point: float
    # Where FLOPs and bytes came from when a cost hook computed them on timed inputs (solbench.data.cost).
    cost: dict[str, Any] | None = field(default=None, compare=False)

    def as_dict(self) -> dict:
        return asdict(self)

    def contract_dict(self) -> dict:
        """The keys of DESIGN.md's `sol --json` contract."""
        keys = ("workload", "flops", "bytes", "arithmetic_intensity", "t_compute_s", "t_memory_s",
                "t_ideal_s", "bound")
        return {k: getattr(self, k) for k in keys}


def point(flops: int, nbytes: int, compute_dtype: str, spec: HardwareSpec, workload: str = "") -> RooflinePoint:
    peak = spec.peak(compute_dtype)
    bw = spec.memory_bandwidth
    return RooflinePoint(
        workload=workload,
        flops=int(flops),
        bytes=int(nbytes),
        arithmetic_intensity=arithmetic_intensity(flops, nbytes),
        t_compute_s=t_compute(flops, peak),
        t_memory_s=t_memory(nbytes, bw),
        t_ideal_s=t_ideal(flops, nbytes, peak, bw),
        bound=bound(flops, nbytes, peak, bw),
        compute_dtype=compute_dtype,
        peak_flops=peak,
        memory_bandwidth=bw,
        ridge_point=ridge_point(peak, bw),
    )


def workload_point(problem: Problem, workload: Workload | str, spec: HardwareSpec,
                   axes: dict[str, int] | None = None, work: tuple[int, int] | None = None) -> RooflinePoint:
    """Roofline numbers for one workload of a problem on a spec (``axes``: already resolved, saves a pass).

    ``work``: its (FLOPs, bytes) when its code computes them (a cost hook, ``flops: auto``: the
    engine's :func:`solbench.engine.work.workload_point` runs that code in the problem's host); else
    from the formulas."""
    w = problem.workload(workload) if isinstance(workload, str) else workload
    axes = axes if axes is not None else problem.resolve_axes(w)
    flops, nbytes = work if work is not None else problem.formula_work(axes)
    return point(flops, nbytes, problem.compute_dtype, spec, w.name)


def problem_points(problem: Problem, spec: HardwareSpec) -> list[RooflinePoint]:
    return [workload_point(problem, w, spec) for w in problem.workloads]
