"""The ``profile`` of a result record: Nsight Compute's counters for one call of the candidate.

:func:`profile_from_kernels` turns the kernels of one profiled call (:mod:`solbench.data.ncu`) into a
:class:`Profile`: per kernel the duration, DRAM / L2 / L1 bytes, FLOPs by precision counted from
instruction counters, tensor-pipe, DRAM and SM utilization, occupancy, registers and shared memory;
over the call the totals (utilizations weighted by kernel duration), the peaks ncu reports for each
memory level at the clocks of the run, and a one-line diagnosis (:func:`diagnose`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from solbench.data.ncu import NcuKernel

# Metric names, first found wins: they differ between GPU generations and ncu versions.
DURATION = ("gpu__time_duration.sum",)
DRAM_READ = ("dram__bytes_read.sum",)
DRAM_WRITE = ("dram__bytes_write.sum",)
L2_BYTES = ("lts__t_bytes.sum",)
L1_BYTES = ("l1tex__t_bytes.sum",)
DRAM_PCT = ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
SM_PCT = ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)
SM_BUSY_PCT = ("sm__instruction_throughput.avg.pct_of_peak_sustained_active",
               "sm__inst_issued.avg.pct_of_peak_sustained_active", "sm__inst_issued.avg.pct_of_peak_sustained_elapsed")
L2_PCT = ("lts__throughput.avg.pct_of_peak_sustained_elapsed",)
L1_PCT = ("l1tex__throughput.avg.pct_of_peak_sustained_active", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed")
OCCUPANCY_PCT = ("sm__warps_active.avg.pct_of_peak_sustained_active",)
REGISTERS = ("launch__registers_per_thread",)
GRID = ("launch__grid_size",)
BLOCK = ("launch__block_size",)
# Tensor pipes: HMMA (mma.sync), GMMA (Hopper's wgmma), or the pipe as a whole; the busiest counts.
TENSOR_PCT = ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
              "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
              "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
              "sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active")
# Peak bytes per cycle of each level, and that level's cycles per second during the kernel.
LEVEL_PEAKS = {"dram": ("dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second"),
               "l2": ("lts__t_bytes.sum.peak_sustained", "lts__cycles_elapsed.avg.per_second"),
               "l1": ("l1tex__t_bytes.sum.peak_sustained", "l1tex__cycles_elapsed.avg.per_second")}
# FLOPs from thread-level SASS counters, as ncu's roofline counts them: add + mul + 2 x fma.
_SCALAR_FLOPS = {"float64": "d", "float32": "f", "float16": "h"}
_SCALAR = "smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum"
# Tensor-core work: "math ops" counters per source type. One op is one FLOP: on the H200 probe
# (tests/fixtures/ncu) a 4096^3 bf16 GEMM counted 2^37 = 2 * 4096^3 ops, and ncu's dense HGMMA peak
# (sparsity off) at the run's 1.59 GHz is 858 TFLOP/s = 989 TFLOP/s * 1.59 / 1.83. The generic
# counter of a source type (sm__ops_path_tensor_src_bf16_dst_fp32) covers every instruction kind; the
# per-instruction ones (..._op_hgmma_src_tf32_...) count only where no generic one exists. Sparse
# ops (_sparsity_on) are left out: spec files hold dense peaks only.
TENSOR_OPS = re.compile(r"^sm__ops_path_tensor_(?:op_(?P<op>[a-z]+)_)?src_(?P<src>[a-z0-9]+)(?:_dst_[a-z0-9]+)?"
                        r"(?P<sparsity>_sparsity_(?:on|off))?\.sum$")
FLOPS_PER_TENSOR_OP = 1
_TENSOR_SRC = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "fp8": "float8", "fp64": "float64",
               "int8": "int8", "int4": "int4", "fp4": "float4"}
# Diagnosis thresholds, in percent of peak: ncu's own rule calls a unit busy from 60%.
BUSY_PCT = 60.0
SATURATED_PCT = 80.0
IDLE_PCT = 20.0
LOW_SM_BUSY_PCT = 30.0
TENSOR_DTYPES = ("bfloat16", "float16", "tf32", "float8_e4m3fn", "float8_e5m2", "int8")


class KernelProfile(BaseModel):
    """One kernel of the profiled call."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the kernel's name as ncu reports it")
    duration_s: float | None = Field(None, description="its duration (gpu__time_duration)")
    dram_read_bytes: float | None = Field(None, description="bytes read from DRAM")
    dram_write_bytes: float | None = Field(None, description="bytes written to DRAM")
    l2_bytes: float | None = Field(None, description="bytes through the L2 (lts__t_bytes)")
    l1_bytes: float | None = Field(None, description="bytes through L1/TEX (l1tex__t_bytes)")
    flops: dict[str, float] = Field(default_factory=dict, description="FLOPs by precision, from instruction "
                                                                      "counters; tensor-core work under tensor_<dtype>")
    tensor_pipe_pct: float | None = Field(None, description="tensor pipes' active cycles, % of peak (busiest pipe)")
    dram_pct: float | None = Field(None, description="DRAM throughput, % of peak")
    sm_pct: float | None = Field(None, description="SM throughput (busiest SM unit), % of peak")
    sm_busy_pct: float | None = Field(None, description="SM instruction throughput, % of peak")
    l2_pct: float | None = Field(None, description="L2 throughput, % of peak")
    l1_pct: float | None = Field(None, description="L1/TEX throughput, % of peak")
    occupancy_pct: float | None = Field(None, description="achieved occupancy: active warps, % of the SM's maximum")
    registers_per_thread: float | None = Field(None, description="registers per thread")
    shared_mem_bytes: float | None = Field(None, description="shared memory per block, static + dynamic")
    grid_size: float | None = Field(None, description="blocks launched")
    block_size: float | None = Field(None, description="threads per block")


class ProfileSummary(BaseModel):
    """The whole call: sums over its kernels, utilizations weighted by kernel duration."""

    model_config = ConfigDict(extra="forbid")

    kernels: int = Field(0, description="kernels profiled in the call")
    duration_s: float | None = Field(None, description="their durations summed")
    dram_bytes: float | None = Field(None, description="DRAM bytes read and written")
    dram_read_bytes: float | None = Field(None, description="DRAM bytes read")
    dram_write_bytes: float | None = Field(None, description="DRAM bytes written")
    l2_bytes: float | None = Field(None, description="bytes through the L2")
    l1_bytes: float | None = Field(None, description="bytes through L1/TEX")
    flops: float | None = Field(None, description="all counted FLOPs; null when tensor pipes ran but no "
                                                  "tensor FLOP counter was available")
    tensor_flops: float | None = Field(None, description="FLOPs counted on the tensor pipes")
    tensor_pipe_pct: float | None = Field(None, description="tensor pipes' active cycles, % of peak (duration-weighted)")
    dram_pct: float | None = Field(None, description="DRAM throughput, % of peak (duration-weighted)")
    sm_pct: float | None = Field(None, description="SM throughput, % of peak (duration-weighted)")
    sm_busy_pct: float | None = Field(None, description="SM instruction throughput, % of peak (duration-weighted)")
    l2_pct: float | None = Field(None, description="L2 throughput, % of peak (duration-weighted)")
    occupancy_pct: float | None = Field(None, description="achieved occupancy, % (duration-weighted)")
    dram_peak_bytes_per_s: float | None = Field(None, description="ncu's DRAM peak at the run's clocks")
    l2_peak_bytes_per_s: float | None = Field(None, description="ncu's L2 peak at the run's clocks")
    l1_peak_bytes_per_s: float | None = Field(None, description="ncu's L1 peak at the run's clocks")
    diagnosis: str = Field("", description="one line from the counters: what bounds the call")


class Profile(BaseModel):
    """A record's ``profile``: how the call was profiled, each kernel, and the summary."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field("ncu", description="the profiler")
    tool_version: str | None = Field(None, description="the profiler's version")
    options: list[str] = Field(default_factory=list, description="the profiler's options (clock control, sections)")
    status: str = Field("ok", description="ok, or failed (reason says why; the record's own status stands)")
    reason: str | None = Field(None, description="why the profile failed")
    raw: str | None = Field(None, description="the raw export this profile was read from (beside the results)")
    process_id: int | None = Field(None, description="the worker's process id in the raw export")
    seconds: float | None = Field(None, description="wall time of the profiled pass")
    phases_s: dict[str, float] = Field(default_factory=dict, description="where the profiled pass's wall time went: "
                                       "worker start (what the run did not hide), warm-up call, profiled call (ncu's "
                                       "replays), report written, export")
    kernels: list[KernelProfile] = Field(default_factory=list, description="each kernel of the profiled call")
    summary: ProfileSummary = Field(default_factory=ProfileSummary, description="the call as a whole")


def _flops(k: NcuKernel) -> dict[str, float]:
    out: dict[str, float] = {}
    for dtype, p in _SCALAR_FLOPS.items():
        parts = [_scalar_count(k, _SCALAR.format(p=p, op=op)) for op in ("add", "mul", "fma")]
        if any(x is not None for x in parts):
            add, mul, fma = (x or 0.0 for x in parts)
            if add + mul + fma:
                out[dtype] = add + mul + 2 * fma
    for src, ops in _tensor_ops(k).items():
        if ops:
            out["tensor_" + _TENSOR_SRC.get(src, src)] = ops * FLOPS_PER_TENSOR_OP
    return out


def _scalar_count(k: NcuKernel, metric: str) -> float | None:
    """An instruction count: the ``.sum`` counter, else (roofline sections collect only rates) its rate per
    elapsed cycle times the elapsed cycles of the SM sub-partitions."""
    if metric in k.metrics:
        return k.metrics[metric]
    rate, cycles = k.get(metric + ".per_cycle_elapsed"), k.get("smsp__cycles_elapsed.avg", "sm__cycles_elapsed.avg")
    return rate * cycles if rate is not None and cycles is not None else None


def _tensor_ops(k: NcuKernel) -> dict[str, float]:
    """Tensor ops per source type: the generic counter, else the sum over instruction kinds; a counter
    with no sparsity suffix or with _sparsity_off (the same count twice when both exist) counts once."""
    generic: dict[str, float] = {}
    by_op: dict[tuple[str, str], float] = {}
    for name, value in k.metrics.items():
        m = TENSOR_OPS.match(name)
        if m is None or m.group("sparsity") == "_sparsity_on":
            continue
        if m.group("op"):
            key = (m.group("op"), m.group("src"))
            by_op[key] = max(by_op.get(key, 0.0), value)
        else:
            generic[m.group("src")] = max(generic.get(m.group("src"), 0.0), value)
    out = dict(generic)
    for (_, src), value in by_op.items():
        if src not in generic:
            out[src] = out.get(src, 0.0) + value
    return out


def _has_tensor_counter(k: NcuKernel) -> bool:
    return any(TENSOR_OPS.match(n) for n in k.metrics)


def _shared(k: NcuKernel) -> float | None:
    parts = [k.get("launch__shared_mem_per_block_static"), k.get("launch__shared_mem_per_block_dynamic")]
    if all(p is None for p in parts):
        return k.get("launch__shared_mem_per_block")
    return sum(p or 0.0 for p in parts)


def kernel_profile(k: NcuKernel) -> KernelProfile:
    """The fields of one kernel from its metrics (missing metrics stay null)."""
    tensor = [x for x in (k.get(n) for n in TENSOR_PCT) if x is not None]
    return KernelProfile(
        name=k.name, duration_s=k.get(*DURATION), dram_read_bytes=k.get(*DRAM_READ),
        dram_write_bytes=k.get(*DRAM_WRITE), l2_bytes=k.get(*L2_BYTES), l1_bytes=k.get(*L1_BYTES), flops=_flops(k),
        tensor_pipe_pct=max(tensor) if tensor else None, dram_pct=k.get(*DRAM_PCT), sm_pct=k.get(*SM_PCT),
        sm_busy_pct=k.get(*SM_BUSY_PCT), l2_pct=k.get(*L2_PCT), l1_pct=k.get(*L1_PCT),
        occupancy_pct=k.get(*OCCUPANCY_PCT), registers_per_thread=k.get(*REGISTERS), shared_mem_bytes=_shared(k),
        grid_size=k.get(*GRID), block_size=k.get(*BLOCK),
    )


def _total(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _weighted(kernels: list[KernelProfile], field: str) -> float | None:
    """The duration-weighted mean of a percentage over the kernels that report it."""
    pairs = [(getattr(k, field), k.duration_s or 0.0) for k in kernels if getattr(k, field) is not None]
    weight = sum(w for _, w in pairs)
    if not pairs:
        return None
    if weight <= 0:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * w for v, w in pairs) / weight


def level_peaks(raw: list[NcuKernel]) -> dict[str, float]:
    """Each memory level's peak bytes/s as ncu reports it (peak bytes per cycle x cycles per second),
    the median over the kernels that carry both metrics."""
    import statistics

    out = {}
    for level, (per_cycle, per_second) in LEVEL_PEAKS.items():
        values = [k.metrics[per_cycle] * k.metrics[per_second] for k in raw
                  if per_cycle in k.metrics and per_second in k.metrics]
        if values:
            out[level] = statistics.median(values)
    return out


def summarize(kernels: list[KernelProfile], raw: list[NcuKernel], compute_dtype: str | None = None) -> ProfileSummary:
    """The call's totals, weighted utilizations, level peaks and diagnosis."""
    read, write = _total([k.dram_read_bytes for k in kernels]), _total([k.dram_write_bytes for k in kernels])
    tensor_flops = _total([sum(v for n, v in k.flops.items() if n.startswith("tensor_")) or None for k in kernels])
    counted = _total([sum(k.flops.values()) or None for k in kernels])
    tensor_ran = any((k.tensor_pipe_pct or 0) > 1.0 for k in kernels)
    blind = tensor_ran and raw and not any(_has_tensor_counter(k) for k in raw)
    peaks = level_peaks(raw)
    s = ProfileSummary(
        kernels=len(kernels), duration_s=_total([k.duration_s for k in kernels]),
        dram_bytes=None if read is None and write is None else (read or 0.0) + (write or 0.0),
        dram_read_bytes=read, dram_write_bytes=write, l2_bytes=_total([k.l2_bytes for k in kernels]),
        l1_bytes=_total([k.l1_bytes for k in kernels]), flops=None if blind else (counted or 0.0),
        tensor_flops=tensor_flops, tensor_pipe_pct=_weighted(kernels, "tensor_pipe_pct"),
        dram_pct=_weighted(kernels, "dram_pct"), sm_pct=_weighted(kernels, "sm_pct"),
        sm_busy_pct=_weighted(kernels, "sm_busy_pct"), l2_pct=_weighted(kernels, "l2_pct"),
        occupancy_pct=_weighted(kernels, "occupancy_pct"), dram_peak_bytes_per_s=peaks.get("dram"),
        l2_peak_bytes_per_s=peaks.get("l2"), l1_peak_bytes_per_s=peaks.get("l1"),
    )
    s.diagnosis = diagnose(s, compute_dtype)
    return s


def diagnose(s: ProfileSummary, compute_dtype: str | None = None) -> str:
    """One line from the counters, by ncu's rule that a unit above 60% of its peak is the limiter.

    Memory saturated while the SMs idle is still bandwidth bound (fewer bytes is the fix, not more
    compute); busy SMs on a tensor-core dtype with idle tensor pipes means the math runs on the
    CUDA cores; neither memory nor compute busy is latency (too few warps, stalls, launch gaps).
    """
    if not s.kernels or s.duration_s is None:
        return "no kernel profiled"
    dram, sm, l2 = s.dram_pct or 0.0, s.sm_pct or 0.0, s.l2_pct or 0.0
    tensor = s.tensor_pipe_pct or 0.0
    if dram >= BUSY_PCT and dram >= sm:
        if dram >= SATURATED_PCT and s.sm_busy_pct is not None and s.sm_busy_pct < LOW_SM_BUSY_PCT:
            return "bandwidth bound: DRAM saturated while SM busy is low (cut bytes: fuse, narrower types)"
        return "bandwidth bound (DRAM)"
    if l2 >= BUSY_PCT and l2 >= sm:
        return "L2 bandwidth bound (reuse misses L1, or atomics / reductions through L2)"
    if sm >= BUSY_PCT:
        if compute_dtype in TENSOR_DTYPES and tensor < IDLE_PCT:
            return "compute bound but tensor pipes idle (math on the CUDA cores)"
        return "compute bound (tensor pipes)" if tensor >= BUSY_PCT else "compute bound"
    occupancy = s.occupancy_pct
    if occupancy is not None and occupancy < IDLE_PCT:
        return "latency bound: low occupancy (too few warps to hide memory latency)"
    return "latency bound: neither memory nor compute above 60% of peak"


def profile_from_kernels(ncu_kernels: list[NcuKernel], compute_dtype: str | None = None, **fields: Any) -> Profile:
    """The :class:`Profile` of one call from its kernels (``fields``: tool, options, raw, process_id...)."""
    kernels = [kernel_profile(k) for k in ncu_kernels]
    return Profile(kernels=kernels, summary=summarize(kernels, ncu_kernels, compute_dtype), **fields)


def failed_profile(reason: str, **fields: Any) -> Profile:
    """A profile that could not be taken; the record keeps its own status and time."""
    return Profile(status="failed", reason=reason, **fields)
