"""Scores and records: the spec a run is scored against, the physics floor, the ResultRecord.

On CUDA the spec is ``--gpu`` or the datasheet spec matching the device name. On the CPU it is
``--gpu`` (e.g. a measured CPU spec from ``solbench calibrate``) or a built-in *upper-bound*
estimate, ``cpu_estimate``: every peak and the bandwidth are set above what a CPU core can reach
(AVX-512 FMA / AMX rates at 5 GHz, L1 load bandwidth), so the physics floor never rejects an
honest CPU run. SOL against it is low by design; records scored against it say
``roof: "estimate"`` and carry the ``cpu_estimate`` flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from solbench._version import __version__
from solbench.data import (
    CPU_ESTIMATE_ID,
    NOISY_FLAG,
    HardwareSpec,
    Problem,
    ResultRecord,
    RooflinePoint,
    Status,
    Workload,
    cpu_estimate_spec,
    detect_spec,
    load_spec,
    measured_refinement,
    noisy_reason,
    point,
    sol,
)
from solbench.engine.provenance import candidate_git
from solbench.worker import CandidateFile, baseline_of

# The physics floor, two rules (see physics_floor): no time below the measured ceilings' T_ideal
# less this noise margin (burst ceilings read within a few percent run to run; a read-only stream
# can beat the copy bandwidth calibrate measures), and no SOL above 1 against the datasheet.
MEASURED_MARGIN = 0.10


def resolve_spec(device: str, gpu: str | None) -> tuple[HardwareSpec, str]:
    """The spec to score against and its roof kind ('datasheet', 'measured' or 'estimate')."""
    if gpu:
        spec = load_spec(gpu)  # "cpu_estimate" names the built-in estimate
        return spec, "estimate" if spec.id == CPU_ESTIMATE_ID and spec.path is None else spec.kind
    if device.startswith("cuda"):
        import torch

        spec = detect_spec(torch.cuda.get_device_name(torch.device(device).index or 0))
        return spec, spec.kind
    return cpu_estimate_spec(), "estimate"


@dataclass
class Evaluation:
    """What the parent concluded about one candidate on one workload (before scoring)."""

    status: Status
    reason: str | None = None
    phase: str = ""
    timing: dict[str, Any] = field(default_factory=dict)
    correctness: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def median_s(self) -> float | None:
        m = self.timing.get("median_s")
        return float(m) if isinstance(m, (int, float)) and not isinstance(m, bool) else None


def floor_time(roof: RooflinePoint, spec: HardwareSpec) -> tuple[float, str]:
    """The least time the device can take for this work, and what it rests on.

    ``roof`` is the point against the run's spec. The floor is the larger of: T_ideal against that
    spec when it is a datasheet (SOL above 1 is impossible), and (1 - MEASURED_MARGIN) x T_ideal
    against the measured ceilings of the same GPU, when a calibrated spec exists.
    """
    if spec.device_type == "cpu":
        return _cpu_floor(roof, spec)
    floors = [(roof.t_ideal_s, f"T_ideal on {spec.id}")] if spec.kind != "measured" else []
    measured = measured_refinement(spec)
    if measured is not None:
        t = point(roof.flops, roof.bytes, roof.compute_dtype, measured).t_ideal_s * (1 - MEASURED_MARGIN)
        floors.append((t, f"{1 - MEASURED_MARGIN:g} x T_ideal on the measured {measured.id}"))
    return max(floors, key=lambda f: f[0]) if floors else (0.0, "no floor")


def _cpu_floor(roof: RooflinePoint, spec: HardwareSpec) -> tuple[float, str]:
    """On a CPU the floor is T_ideal on ``cpu_estimate`` (this CPU's cores at AVX-512/AMX rates, 5 GHz,
    L1 bandwidth), never the calibrated ceilings: a CPU's measured roof moves with the machine's load
    and its caches, and an honest eager op on an idle machine may beat a roof measured on a busy one.
    A roof of its own (--gpu FILE) stating more than the estimate counts too."""
    estimate = cpu_estimate_spec()
    floors = [(point(roof.flops, roof.bytes, roof.compute_dtype, estimate).t_ideal_s, f"T_ideal on {estimate.id}")]
    if spec.kind == "datasheet" and spec.id != CPU_ESTIMATE_ID:
        floors.append((roof.t_ideal_s, f"T_ideal on {spec.id}"))
    return max(floors, key=lambda f: f[0])


def physics_floor(evaluation: Evaluation, roof: RooflinePoint, spec: HardwareSpec) -> Evaluation:
    """A PASSED result faster than the device allows (see :func:`floor_time`) becomes REWARD_HACK."""
    t = evaluation.median_s
    if evaluation.status != Status.PASSED or t is None:
        return evaluation
    floor, basis = floor_time(roof, spec)
    if t < floor:
        evaluation.status = Status.REWARD_HACK
        evaluation.reason = f"faster than the device allows (median {t:.4g} s < {floor:.4g} s = {basis})"
        evaluation.flags.append("below_physics_floor")
    return evaluation


def build_record(
    *,
    problem: Problem,
    workload: Workload,
    axes: dict[str, int],
    candidate: CandidateFile,
    evaluation: Evaluation,
    roof: RooflinePoint,
    spec: HardwareSpec,
    roof_kind: str,
    device: str,
    device_name: str,
    environment: dict[str, Any],
    telemetry: dict[str, Any],
    log: str,
    run_id: str,
    harness: dict[str, float] | None = None,
) -> ResultRecord:
    """The record of one evaluation; ``harness`` (where the harness's own time went) nests below."""
    passed = evaluation.status == Status.PASSED
    t = evaluation.median_s if passed else None
    flags = list(evaluation.flags)
    if roof_kind == "estimate":
        flags.append(CPU_ESTIMATE_ID)
    for key in ("power_throttled", "thermal_throttled", "machine_busy"):
        if telemetry.get(key):
            flags.append(key)
    flags.extend(f for f in evaluation.timing.get("flags", []) or [] if isinstance(f, str))
    if evaluation.status == Status.PASSED and noisy_reason(evaluation.timing):
        flags.append(NOISY_FLAG)
    floor = spec.launch_floor(evaluation.timing.get("method")) if t else None
    return ResultRecord(
        problem=problem.name,
        workload=workload.name,
        solution=candidate.name,
        status=evaluation.status,
        device=device_name,
        gpu_spec=spec.id,
        time_s=t,
        sol=sol(roof.t_ideal_s, t) if t else None,
        flops=roof.flops,
        bytes=roof.bytes,
        t_ideal_s=roof.t_ideal_s,
        bound=roof.bound,
        timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        solbench_version=__version__,
        run_id=run_id,
        solution_path=candidate.display_path,
        solution_sha256=candidate.sha256,
        device_type="cuda" if device.startswith("cuda") else "cpu",
        axes=axes,
        compute_dtype=problem.compute_dtype,
        roof=roof_kind,
        arithmetic_intensity=roof.arithmetic_intensity,
        t_compute_s=roof.t_compute_s,
        t_memory_s=roof.t_memory_s,
        achieved_flops_per_s=roof.flops / t if t else None,
        achieved_bytes_per_s=roof.bytes / t if t else None,
        cost=roof.cost,
        t_floor_s=floor[0] if floor else None,
        t_floor_basis=floor[1] if floor else None,
        baseline=baseline_of(candidate.path),
        git=candidate_git(candidate.path, run_id),
        reason=evaluation.reason,
        flags=sorted(set(flags)),
        tags=list(problem.tags),
        timing=evaluation.timing,
        correctness=evaluation.correctness,
        telemetry=telemetry,
        environment=environment,
        log=log,
        harness=dict(harness or {}),
    )
