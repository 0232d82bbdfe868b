"""Valid, realistic result records for testing the presentation layer (leaderboard, plots, report).

Numbers come from real problems and specs through ``solbench.data.roofline.workload_point``: a record's
time is T_ideal / SOL for a SOL the factory chooses, so tests can check every aggregate against
the chosen SOLs (``RecordSet.truth``), independently of the code under test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import yaml

from solbench.data.hardware import HardwareSpec, load_spec
from solbench.data.problem import Problem, load_problem
from solbench.data.record import ResultRecord, Status
from solbench.data.roofline import RooflinePoint, point, workload_point

ROOT = Path(__file__).resolve().parent.parent
SEED_PROBLEM = ROOT / "problems" / "llama3_1_8b" / "attn_o_proj_residual"
MEASURED_SPEC_ID = "h200_sxm_measured"


def _toy_problem(name: str, tags: list[str], compute_dtype: str, flops: str, workloads: list[int]) -> Problem:
    """An in-memory problem (no reference file needed: only its roofline numbers are used)."""
    return Problem.model_validate({
        "name": name, "description": "test problem", "source": {"model": "test/model"}, "tags": tags,
        "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": 4096}},
        "inputs": {"x": {"shape": ["T", "H"], "dtype": compute_dtype},
                   "w": {"shape": ["H"], "dtype": compute_dtype}},
        "outputs": {"out": {"shape": ["T", "H"], "dtype": compute_dtype}},
        "reference": "reference.py:run", "flops": flops, "bytes": "auto", "compute_dtype": compute_dtype,
        "tolerance": {"atol": 1e-2, "rtol": 1e-2},
        "workloads": [{"name": f"t{t}", "axes": {"T": t}} for t in workloads],
    })


def problems() -> list[Problem]:
    """The seed GEMM (compute- and memory-bound workloads), a bf16 norm, and an fp32 op."""
    return [
        load_problem(SEED_PROBLEM),
        _toy_problem("toy.rmsnorm", ["norm", "memory"], "bfloat16", "4 * T * H", [1, 128, 4096]),
        _toy_problem("toy.scan_fp32", ["scan"], "float32", "64 * T * H", [16, 1024]),
    ]


def measured_spec(base: str = "h200_sxm") -> HardwareSpec:
    """A measured spec refining a datasheet one, ceilings a little under the datasheet's."""
    ds = load_spec(base)
    return HardwareSpec.model_validate({
        "id": MEASURED_SPEC_ID, "name": f"{ds.name} (measured)", "kind": "measured", "based_on": ds.id,
        "match": [], "memory_bandwidth": ds.memory_bandwidth * 0.89,
        "peak_flops": {k: v * 0.76 for k, v in ds.peak_flops.items()},
        "measured": {"method": "solbench calibrate (test)", "timestamp": "2026-11-29T12:00:00Z",
                     "device": "NVIDIA H200", "versions": {"torch": "2.11.0"}},
    })


def write_measured_spec(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{MEASURED_SPEC_ID}.yaml"
    path.write_text(yaml.safe_dump(measured_spec().model_dump(mode="json", exclude_none=True), sort_keys=False))
    return path


# name -> (SOL when memory-bound, SOL when compute-bound); None = not passing (see _outcome).
CANDIDATES = {
    "torch_eager": (0.55, 0.62),
    "triton_fused": (0.81, 0.86),
    "cupy_raw": (0.91, 0.40),   # INCORRECT on the largest workload of each problem
    "flaky": (0.70, 0.70),      # RUNTIME_ERROR on the first workload, TIMEOUT on the second
    "cheater": (0.99, 0.99),    # REWARD_HACK on one workload
    "broken": (None, None),     # COMPILE_ERROR everywhere
}
GPUS = {"h200_sxm": "NVIDIA H200", "h100_sxm": "NVIDIA H100 80GB HBM3"}


@dataclass
class RecordSet:
    records: list[ResultRecord] = field(default_factory=list)
    # (gpu spec id, roof, problem, candidate, workload) -> the best SOL among its PASSED records
    truth: dict[tuple[str, str, str, str, str], float] = field(default_factory=dict)

    def dicts(self) -> list[dict]:
        return [r.model_dump(mode="json") for r in self.records]

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(r.to_json_line() for r in self.records), encoding="utf-8")
        return path


def _outcome(cand: str, index: int, n_workloads: int) -> Status:
    if cand == "broken":
        return Status.COMPILE_ERROR
    if cand == "cupy_raw" and index == n_workloads - 1:
        return Status.INCORRECT
    if cand == "flaky" and index < 2:
        return Status.RUNTIME_ERROR if index == 0 else Status.TIMEOUT
    if cand == "cheater" and index == 1:
        return Status.REWARD_HACK
    return Status.PASSED


REASONS = {
    Status.INCORRECT: "max abs error 3.1e-01 > atol 1.0e-02 + rtol 2.0e-02 * |ref| at [17, 4095]",
    Status.RUNTIME_ERROR: "worker died: signal 11 (SIGSEGV)",
    Status.TIMEOUT: "no result after 120 s: process group killed",
    Status.COMPILE_ERROR: "SyntaxError: invalid syntax (candidate.py, line 3)",
    Status.REWARD_HACK: "time below the roofline floor: 0.21 x T_ideal",
}


def make_record(problem: Problem, pt: RooflinePoint, spec: HardwareSpec, cand: str, status: Status,
                sol_value: float | None, *, roof: str = "datasheet", device: str = "NVIDIA H200",
                timestamp: str = "2026-11-29T10:00:00+00:00", axes: dict[str, int] | None = None,
                **extra: object) -> ResultRecord:
    passed = status is Status.PASSED
    time_s = pt.t_ideal_s / sol_value if passed and sol_value else None
    fields: dict[str, object] = dict(
        problem=problem.name, workload=pt.workload, solution=cand, status=status.value, device=device,
        gpu_spec=spec.id, time_s=time_s, sol=sol_value if passed else None, flops=pt.flops, bytes=pt.bytes,
        t_ideal_s=pt.t_ideal_s, bound=pt.bound, timestamp=timestamp, solbench_version="0.1.0",
        run_id="run-0001", axes=dict(axes or {}), compute_dtype=problem.compute_dtype, roof=roof,
        arithmetic_intensity=pt.arithmetic_intensity, t_compute_s=pt.t_compute_s, t_memory_s=pt.t_memory_s,
        achieved_flops_per_s=pt.flops / time_s if time_s else None,
        achieved_bytes_per_s=pt.bytes / time_s if time_s else None,
        reason=None if passed else REASONS[status], tags=list(problem.tags),
        flags=["power_throttled"] if passed and pt.bound == "compute" else [],
        timing={"method": "events", "median_s": time_s, "n": 40, "flush_bytes": 2 * 62914560} if passed else {},
        telemetry={"available": True, "sm_min_mhz": 1485, "sm_max_mhz": 1980, "clocks_event_reasons": 4,
                   "clocks_event_reason_names": ["sw_power_cap"]},
        environment={"gpu_name": device, "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130",
                     "triton": "3.6.0", "python": "3.12.3", "hostname": "gpu-box-1",
                     "packages": {"torch": "2.11.0+cu130", "triton": "3.6.0"}},
        log="" if passed else f"Traceback (most recent call last):\n  ...\n{REASONS[status]}\n",
    )
    fields.update(extra)
    return ResultRecord.model_validate(fields)


def make_recordset(*, gpus: dict[str, str] | None = None, candidates: dict | None = None,
                   with_measured: bool = True, seed: int = 0, repeats: int = 1) -> RecordSet:
    """Records for every (GPU, problem, candidate, workload), plus measured-roof copies on the H200.

    ``repeats`` > 1 adds slower PASSED re-runs, so 'best result per workload' is exercised.
    """
    rng = random.Random(seed)
    out = RecordSet()
    gpus = GPUS if gpus is None else gpus
    candidates = CANDIDATES if candidates is None else candidates
    roofs: list[tuple[HardwareSpec, str, str]] = [(load_spec(g), "datasheet", d) for g, d in gpus.items()]
    if with_measured and "h200_sxm" in gpus:
        roofs.append((measured_spec(), "measured", gpus["h200_sxm"]))
    for spec, roof, device in roofs:
        for prob in problems():
            for i, wl in enumerate(prob.workloads):
                pt = workload_point(prob, wl, spec)
                axes = prob.resolve_axes(wl)
                for cand, (mem_sol, comp_sol) in candidates.items():
                    status = _outcome(cand, i, len(prob.workloads))
                    base = mem_sol if pt.bound == "memory" else comp_sol
                    if status is not Status.PASSED or base is None:
                        status = Status.COMPILE_ERROR if base is None else status
                        out.records.append(make_record(prob, pt, spec, cand, status, None, roof=roof, device=device,
                                                       axes=axes))
                        continue
                    best = round(base * rng.uniform(0.9, 1.0), 4)
                    for r in range(repeats):
                        value = best if r == 0 else round(best * rng.uniform(0.5, 0.95), 4)
                        out.records.append(make_record(prob, pt, spec, cand, status, value, roof=roof,
                                                       device=device, axes=axes,
                                                       timestamp=f"2026-11-29T10:{r:02d}:00+00:00"))
                    out.truth[(spec.id, roof, prob.name, cand, wl.name)] = best
    return out


def hostile_record(name: str = "<script>alert('x')</script>", log: str = "</pre><script>alert(1)</script>") -> ResultRecord:
    """A record whose candidate name, reason and log try to inject markup."""
    prob = problems()[1]
    spec = load_spec("h200_sxm")
    pt = point(prob.flops_for(prob.resolve_axes(prob.workloads[0])),
               prob.bytes_for(prob.resolve_axes(prob.workloads[0])), prob.compute_dtype, spec, prob.workloads[0].name)
    return make_record(prob, pt, spec, name, Status.RUNTIME_ERROR, None, reason=f"bad {name}", log=log)


class HtmlPage(HTMLParser):
    """Every start tag with its attributes, and the text, of an HTML page (for the report tests)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def expected_sol(x: float) -> str:
    """How a SOL must read everywhere: three significant digits written out, never an exponent.

    Built from Python's e-format digits (not from the code under test): 8.12e-01 -> 0.812,
    1.10e-05 -> 0.0000110, 1.23e+01 -> 12.3, 1.00e+03 -> 1000.
    """
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.2e}".split("e")
    digits, e = mantissa.replace(".", ""), int(exponent)
    if e < 0:
        return "0." + "0" * (-e - 1) + digits
    whole = e + 1
    return digits[:whole] + "0" * (whole - len(digits)) + ("." + digits[whole:] if whole < len(digits) else "")
