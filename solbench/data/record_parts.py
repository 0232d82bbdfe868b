"""The parts of a result record (``timing``, ``correctness``, ``telemetry``, ``environment``, ``harness``), typed.

Each model declares every key the engine writes into its part and refuses any other (``extra="forbid"``):
a key the engine starts writing is declared here first, with its meaning. The record keeps each part as
the dict the engine filled; these models check it and give ``solbench schema record`` its fields.
The harness's phases are declared here once (:data:`HARNESS_PHASES`); the engine's ledger charges them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    """A declared structure: an undeclared key is refused."""

    model_config = ConfigDict(extra="forbid")


def _f(description: str) -> Any:
    """An optional field (absent or null: not measured, not applicable)."""
    return Field(None, description=description)


def _req(description: str) -> Any:
    """A field every instance has."""
    return Field(description=description)


# --- timing ------------------------------------------------------------------------------------------------
class TimingClock(_Strict):
    """``timing.clock``: the SM clock read around chunks of samples (CUDA, the clock probe)."""

    available: bool | None = _f("whether any chunk had a valid clock reading")
    reason: str | None = _f("why not, when unavailable")
    backend: str | None = _f("the clock probe's kernel backend")
    sm_mhz_effective: float | None = _f("the SM clock over the samples, weighted by samples per chunk (MHz)")
    sm_mhz_min: float | None = _f("the slowest chunk's SM clock (MHz)")
    sm_mhz_max: float | None = _f("the fastest chunk's SM clock (MHz)")
    chunks_mhz: list[float | None] | None = _f("each chunk's SM clock (MHz; null: no valid reading)")
    max_sm_mhz: float | None = _f("the device's maximum SM clock (NVML)")
    cycles_median: float | None = _f("the median time in SM cycles at the effective clock")
    clock_ratio: float | None = _f("effective / maximum SM clock")
    low_clock_samples: int | None = _f("samples in chunks below the low-clock fraction of the maximum")
    low_clock_fraction: float | None = _f("those samples' share of all")
    median_s_at_max_clock: float | None = _f("the median scaled to the maximum clock (if it scales with it)")


class TimingCupti(_Strict):
    """``timing.cupti``: the all-stream timer's reading (CUPTI activity records of every stream, CUDA)."""

    timer: str | None = _f("'cupti_all_streams'")
    events_median_s: float | None = _f("the median by CUDA events on the timed stream, per call (the cross-check)")
    span_median_s: float | None = _f("the median span of every stream's kernels per call (the samples reported)")
    rel_err: float | None = _f("(events - span) / span")
    kernels_per_sample: float | None = _f("median kernels per sample")
    streams: list[str] | None = _f("the streams that ran the candidate's kernels")
    timed_span_median_s: float | None = _f("median span up to the timed stream's end event, per call")
    tail_median_s: float | None = _f("median work after the end event (side streams), per call")


class TimingDetails(_Strict):
    """``timing.details``: the method's own readings (CPU: warm-up and sampling; CUDA: flush, spin, graph...)."""

    warmup_s: float | None = _f("wall time of the warm-up")
    sampling_s: float | None = _f("wall time of the sampling loop")
    flush_bytes: int | None = _f("bytes written to flush the L2 before each sample (CUDA)")
    persisting_l2_reset: str | None = _f("the persisting-L2 reset before each sample: ok, off or why not")
    clock_probe_backend: str | None = _f("the clock probe's kernel backend")
    clock_probe_error: str | None = _f("why there is no clock probe")
    cupti_error: str | None = _f("why the trace could not be cut into the timed samples")
    cupti_traces: int | None = _f("CUPTI traces taken (one per chunk of samples)")
    span_tick_s: float | None = _f("the spans' clock tick (a median known to one tick counts as known)")
    ci_checks: list[tuple[int, float | None]] | None = _f("(samples, relative CI) at each chunk's CI check")
    empty_window_s: float | None = _f("median event time around nothing: the timer's own cost")
    events_estimate_s: float | None = _f("the warm-up's estimate of one call (chooses the method)")
    spin_s: float | None = _f("the spin kernel's length before each sample (covers the host's enqueue)")
    spin_hz: float | None = _f("the spin kernel's cycles per second")
    host_enqueue_median_s: float | None = _f("median host time to enqueue one call")
    launch_gap_exposed: float | None = _f("share of samples whose enqueue outlasted the spin (a gap may be timed)")
    graph_calls_per_replay: int | None = _f("calls captured back to back in the graph")
    graph_replays: int | None = _f("graph replays timed")
    graph_replay_median_s: float | None = _f("median time of a whole replay")
    graph_capture_rng: str | None = _f("the RNG state check after a failed capture")
    setup_s: float | None = _f("wall time of the timer's setup (flush buffer, L2 reset, clock probe) before the warm-up")
    trace_s: float | None = _f("wall time of starting, stopping and reading the CUPTI traces")
    worker_probe_s: float | None = _f("the worker's wall time in the memoization probe after the samples")
    worker_findings_s: float | None = _f("the worker's wall time in the guards' checks after the probe (threads, "
                                         "trace, persisting L2), before its reply")
    worker_rest_s: float | None = _f("the worker's wall time in the timing request outside the timer, the probe and "
                                     "the guards' checks")
    worker_timer_s: float | None = _f("the worker's wall time in the timer (warm-up, sampling, traces and the rest)")
    worker_receive_s: float | None = _f("the worker's wall time reading the timing request (its sets mapped)")


class TimingInterleave(_Strict):
    """``timing.interleave``: where the record sits in an interleaved run (``--interleave``)."""

    round: int = _req("the round (1-based)")
    of: int = _req("rounds in all")
    order: list[str] = _req("the candidates in their order within a round")
    cooldown_s: float = _req("seconds waited for the device to cool down before this record")


class Timing(_Strict):
    """``timing``: how the median was measured (solbench.timing; docs/timing.md)."""

    samples_s: list[float] | None = _f("every timed sample, seconds per call")
    median_s: float | None = _f("median of samples_s (recomputed by the parent from the samples)")
    p10_s: float | None = _f("10th percentile")
    p90_s: float | None = _f("90th percentile")
    iqr_s: float | None = _f("interquartile range")
    min_s: float | None = _f("fastest sample")
    mean_s: float | None = _f("mean sample")
    n: int | None = _f("number of samples")
    ci95_rel: float | None = _f("95% CI of the median, relative; null when unknown")
    method: str | None = _f("cpu, events or graph")
    method_reason: str | None = _f("why that method")
    flush_bytes: int | None = _f("bytes written to flush the L2 before each sample")
    warmup_calls: int | None = _f("calls of the warm-up")
    stop_reason: str | None = _f("why sampling stopped: ci_target, budget or max_samples")
    clock: TimingClock | None = _f("SM clocks read around sample chunks (CUDA)")
    cupti: TimingCupti | None = _f("CUPTI activity records: every stream's time (CUDA)")
    flags: list[str] | None = _f("the timing's flags, e.g. 'launch_gap_exposed', 'events_cupti_mismatch'")
    details: TimingDetails | None = _f("the method's own readings")
    overhead_subtracted_s: float | None = _f("per call, already taken off every sample")
    interleave: TimingInterleave | None = _f("with --interleave: the round and position")


# --- correctness -------------------------------------------------------------------------------------------
class OutputComparison(_Strict):
    """One output compared with the reference (solbench.engine.correctness)."""

    passed: bool = _req("within the tolerance")
    reason: str | None = _f("what was wrong")
    numel: int = _req("elements compared")
    mismatches: int = _req("elements outside atol + rtol * |ref|")
    mismatch_ratio: float = _req("mismatches / numel")
    nonfinite_mismatches: int = _req("NaN or Inf where the reference is finite")
    max_abs_err: float | Literal["inf"] | None = _f("largest |out - ref| ('inf': unbounded; null: NaN)")
    max_rel_err: float | Literal["inf"] | None = _f("largest |out - ref| / |ref|")
    first_bad_index: list[int] | None = _f("index of the first mismatch")
    first_bad_value: float | None = _f("the output there")
    first_bad_expected: float | None = _f("the reference there")


class RoundCheck(_Strict):
    """One correctness round: fresh inputs, every output compared."""

    round: int = _req("the round (1-based)")
    outputs: dict[str, OutputComparison] = _req("per output name")


class TimedCheck(_Strict):
    """``correctness.timed``: the re-check of outputs kept during timing (solbench.engine.verification)."""

    sets: int = _req("timing sets")
    outputs_checked: int = _req("timed outputs checked against the reference (last per set, kept samples, refresh)")
    samples: int | None = _f("samples the worker timed")
    kept_samples: int | None = _f("samples whose outputs the parent chose to keep")
    edits_applied: int | None = _f("the parent's edits between samples that were applied")
    refresh_set: int | None = _f("the set refreshed with new data before one more call (1-based)")
    passed: bool = _req("every check passed")


class EdgeRoundEntry(_Strict):
    """One edge round of a record (solbench.engine.edge)."""

    name: str = Field(description="e.g. 'large 1e+04', 'offset 3000', 'tiny 1e-15', 'zeros', 'specials -inf', "
                                  "'permuted', 'strided', 'broadcast'")
    shape: str = Field(description="'small' (the workload shrunk by the problem's test_axes) or the workload's name")
    axes: dict[str, int] = Field(default_factory=dict, description="the axes it ran at")
    reason: str | None = Field(default=None, description="skipped: why the reference's own output does not count; "
                                                         "failed: what was wrong")


class EdgeReport(_Strict):
    """``correctness.edge``: the edge rounds run and passed, skipped (and why), and failed."""

    run: list[EdgeRoundEntry] = Field(default_factory=list, description="rounds that passed")
    skipped: list[EdgeRoundEntry] = Field(default_factory=list, description="rounds not run, and why")
    failed: list[EdgeRoundEntry] = Field(default_factory=list, description="at most one: the first failure ends "
                                                                           "the evaluation")


class NvmlView(_Strict):
    """What NVML saw of the device over a window (solbench.guards.outside)."""

    device_util_samples: int = _req("NVML's device utilisation samples in the window")
    device_util_mean: float | None = _f("their mean, 0..1")
    device_busy_s: float | None = _f("utilisation x wall time: the device's busy seconds")
    context_pids: list[int] = _req("processes holding a context on the device (host pids)")
    pids_visible: bool = _req("whether the worker's pid is among them (false: another pid namespace)")
    process_sm_util: dict[int, int] = _req("per process: its highest SM utilisation sample, percent")


class OutsideView(_Strict):
    """What the parent saw of the worker from outside over one burst (solbench.guards.outside.Observer)."""

    wall_s: float = _req("the window's wall time")
    worker_cpu_s: float = _req("the worker's CPU time (its threads' run time)")
    worker_wait_s: float = _req("its main thread's run-queue wait (runnable, another process had the core)")
    other_cpu_s: float = _req("CPU time of its descendants (live, zombie or reaped)")
    other_pids: list[int] = _req("descendants that used CPU")
    cores: int | None = _f("the cores the worker may run on")
    outside_cpu_s: float | None = _f("those cores' busy time less the worker's and its descendants': other "
                                     "processes' work")
    nvml: NvmlView | None = _f("NVML's view (CUDA)")


class BurstAttempt(_Strict):
    """One parent-clocked burst (solbench.engine.burst.judge)."""

    calls: int = _req("calls back to back")
    wall_s: float = _req("the request's wall time by the parent's clock")
    rtt_s: float = _req("the least round trip of empty requests")
    overhead_s: float = _req("the harness's own work per call (CPU), taken off")
    overhead_share: float = _req("its share of the burst's time")
    outside_share: float = _req("other processes' share of the worker's cores (CPU); above the limit: inconclusive")
    per_call_s: float = _req("the parent's time per call")
    ratio: float = _req("claimed median / per_call_s")
    min_ratio: float = _req("the least ratio an honest candidate shows")
    conclusive: bool = _req("whether the burst concludes anything")
    ok: bool = _req("not conclusive, or the ratio at least min_ratio")
    edited_calls: int = _req("calls whose inputs the parent edited before them")
    outside: OutsideView | None = _f("what the parent saw from outside over the burst")
    judged_by: str | None = _f("'device' (NVML's busy time) or why nothing was concluded (GPU, second burst; records before NVML was found no device-busy time)")
    per_call_device_s: float | None = _f("the device's busy time per call, less the harness's kernels")
    harness_device_s: float | None = _f("device time of the harness's own kernels per call (records before NVML was found no device-busy time)")
    ratio_device: float | None = _f("claimed median / per_call_device_s")
    checked_calls: list[int] = _req("calls whose outputs were checked (chosen after the reply)")


class BurstReport(_Strict):
    """``correctness.burst``: the parent-clocked bursts after the timing (docs/security.md)."""

    claimed_s: float = _req("the median the parent recomputed from the raw samples")
    attempts: list[BurstAttempt] = _req("one to three bursts: a third only after a conclusive miss and a burst that "
                                        "concluded nothing")
    passed: bool | None = _f("the claim held (null: a burst's output check failed first)")


class FindingEntry(_Strict):
    """A guard's finding (solbench.guards.findings.Finding)."""

    kind: str = _req("the guard, e.g. 'other_process', 'output_alias'")
    status: str = _req("REWARD_HACK or INCORRECT: what it makes the record")
    reason: str = _req("one line")
    details: dict[str, Any] = Field(default_factory=dict, description="the guard's own evidence (its keys "
                                                                       "differ by guard)")


class Correctness(_Strict):
    """``correctness``: the rounds' comparisons with the reference, the timed outputs' re-check, the burst, the
    edge rounds."""

    passed: bool | None = _f("every check passed")
    rounds: list[RoundCheck] | None = _f("the correctness rounds' comparisons")
    atol: float | None = _f("absolute tolerance")
    rtol: float | None = _f("relative tolerance")
    max_mismatch_ratio: float | None = _f("share of elements allowed outside the tolerance")
    failed_in: str | None = _f("the phase that failed")
    findings: list[FindingEntry] | None = _f("the guards' findings")
    timed: TimedCheck | None = _f("the re-check of outputs kept during timing")
    burst: BurstReport | None = _f("the parent-clocked bursts")
    edge: EdgeReport | None = _f("the edge rounds")


# --- telemetry, environment --------------------------------------------------------------------------------
class Telemetry(_Strict):
    """``telemetry``: NVML's power, clocks and temperature over the timed window (CUDA); the machine's load (CPU)."""

    available: bool | None = _f("whether anything was sampled")
    reason: str | None = _f("why not")
    kind: str | None = _f("'cpu' for the CPU's load; absent for NVML")
    samples: int | None = _f("samples taken")
    interval_s: float | None = _f("sampling interval")
    duration_s: float | None = _f("the window sampled")
    sm_min_mhz: float | None = _f("lowest SM clock sampled")
    sm_max_mhz: float | None = _f("highest SM clock sampled")
    mem_min_mhz: float | None = _f("lowest memory clock sampled")
    mem_max_mhz: float | None = _f("highest memory clock sampled")
    power_min_w: float | None = _f("lowest power sampled")
    power_max_w: float | None = _f("highest power sampled")
    avg_power_w: float | None = _f("energy / duration")
    energy_j: float | None = _f("energy over the window (NVML's counter)")
    temperature_min_c: float | None = _f("lowest temperature sampled")
    temperature_max_c: float | None = _f("highest temperature sampled")
    power_throttled: bool | None = _f("a power-cap clock event reason was set")
    thermal_throttled: bool | None = _f("a thermal clock event reason was set")
    clocks_event_reasons: int | None = _f("NVML's clock event reason bits, ORed over the window")
    clocks_event_reason_names: list[str] | None = _f("their names")
    errors: list[str] | None = _f("NVML calls that failed (at most five)")
    cpus: int | None = _f("CPUs of the machine (CPU)")
    runnable_mean: float | None = _f("mean runnable tasks sampled (CPU)")
    runnable_max: int | None = _f("most runnable tasks sampled (CPU)")
    loadavg_1m: float | None = _f("the 1-minute load average at the end (CPU)")
    busy_share: float | None = _f("share of the CPUs' time busy over the window (CPU)")
    steal_share: float | None = _f("share taken by the hypervisor (CPU)")
    machine_busy: bool | None = _f("other work competed for the CPUs (CPU)")


class Environment(_Strict):
    """``environment``: where the record was made (device, driver, versions, host)."""

    device_type: str | None = _f("cuda or cpu")
    gpu_name: str | None = _f("the GPU's name")
    gpu_uuid: str | None = _f("its UUID")
    gpu_index: int | None = _f("its index as the run saw it")
    gpu_count: int | None = _f("GPUs visible")
    compute_capability: str | None = _f("e.g. '9.0'")
    sm_count: int | None = _f("streaming multiprocessors")
    l2_bytes: int | None = _f("L2 size")
    memory_bytes: int | None = _f("device memory")
    power_limit_w: float | None = _f("the enforced power limit (NVML)")
    persistence_mode: int | None = _f("NVML's persistence mode (1: on)")
    mig_mode: int | None = _f("NVML's MIG mode (1: on)")
    nvml: str | None = _f("why NVML gave nothing, where it did not")
    driver: str | None = _f("the NVIDIA driver")
    cuda: str | None = _f("torch's CUDA version")
    cuda_visible_devices: str | None = _f("CUDA_VISIBLE_DEVICES")
    cpu_model: str | None = _f("the CPU's model")
    cpu_count: int | None = _f("CPUs the run may use")
    hostname: str | None = _f("the host")
    platform: str | None = _f("the OS platform string")
    python: str | None = _f("Python's version")
    torch: str | None = _f("torch's version")
    triton: str | None = _f("triton's version")
    cupy: str | None = _f("cupy's version")
    solbench: str | None = _f("solbench's version")
    packages: dict[str, str] | None = _f("installed versions of the libraries candidates use")
    seed: int | None = _f("the run's seed (null: a random one, kept secret)")


# --- harness -----------------------------------------------------------------------------------------------
class HarnessPhases(_Strict):
    """The disjoint phases of a record's wall time, in seconds (absent: the phase did not happen); their sum
    accounts for ``wall_s`` (solbench.engine.ledger charges them)."""

    memory_wait_s: float | None = _f("waiting for device memory held by other records in flight")
    memory_retry_s: float | None = _f("tries that ran out of device memory beside other records in flight (it ran "
                                      "again with twice its reservation, then alone)")
    cases_s: float | None = _f("the inputs and reference outputs (made, or awaited from the other candidate's lane "
                               "that makes them: once per problem, workload and seed)")
    worker_wait_s: float | None = _f("waiting for the worker to be up (what starting it ahead did not hide)")
    load_s: float | None = _f("the worker importing the candidate")
    warm_s: float | None = _f("a lane's first record: its worker called once on each later workload's inputs before "
                              "its first timing, so that a candidate compiling per shape compiles them then "
                              "(solbench.engine.warm)")
    setup_s: float | None = _f("the candidate's setup(...), untimed")
    rounds_s: float | None = _f("the correctness rounds (the first call and its compile included)")
    timing_request_s: float | None = _f("the timing request, in the window the device is held alone, and what is made "
                                        "for it just before (the refresh set, the first burst's room)")
    recheck_s: float | None = _f("the checks of the timed outputs")
    burst_s: float | None = _f("the parent-clocked burst, in the timing's window, and its checks")
    edge_s: float | None = _f("the edge rounds (legal inputs at other shapes and layouts), checked")
    device_wait_s: float | None = _f("waiting for the device gate (a timing window of another record, or for this "
                                     "record's, untimed work in flight), and the time its worker or problem host "
                                     "was locked for another record's window")
    verdict_s: float | None = _f("the guards' review, the record built, written and handed to hooks")


HARNESS_PHASES: tuple[str, ...] = tuple(HarnessPhases.model_fields)


class WindowParts(_Strict):
    """``harness.window``: where the record's timing window went, the device held alone (diagnostic: these
    seconds are part of ``timing_request_s`` and ``burst_s``)."""

    alone_s: float = _req("the window: from the device held alone to its release after the first burst")
    telemetry_s: float | None = _f("NVML's telemetry sampler started and stopped around the timing request")
    request_s: float | None = _f("the timing request: sent, timed in the worker, its reply read")
    send_s: float | None = _f("of request_s: the request sent (its sets staged for the worker)")
    read_s: float | None = _f("of request_s: the reply read, from its first byte")
    check_s: float | None = _f("the reply's findings, the worker's processes and its statistics restated")
    burst_s: float | None = _f("the first burst: its pings, its calls and the outside view around them")


class Harness(HarnessPhases):
    """``harness``: seconds the harness spent on this record, by phase (not the candidate's time), and the
    route its tensors took."""

    wall_s: float | None = _f("the record's whole wall time (the phases add up to it)")
    first_call_s: float | None = _f("the first call (part of rounds_s)")
    worker_start_s: float | None = _f("the worker's whole start (mostly before this record began)")
    prepared_ahead_s: float | None = _f("a lane's first record: its worker started, loaded and its shapes compiled "
                                        "ahead, off the lane, before the record began (solbench.engine.ahead; not a "
                                        "phase of wall_s)")
    edge_prepare_s: float | None = _f("making the edge rounds' inputs and references (part of cases_s)")
    jit_cache_restored_bytes: int | None = _f("bytes of JIT caches restored for the worker's first record")
    window: WindowParts | None = _f("where the timing window (the device held alone) went")
    transport: str | None = _f("device or memfd: how tensors moved to the worker")
    transport_fallback: str | None = _f("why memfd, where device was asked for")
    memory_retries: list[str] | None = _f("why each try counted in memory_retry_s ran out of memory (first 300 "
                                          "characters)")


# --- top-level details ---------------------------------------------------------------------------------------
class CostSummary(_Strict):
    """``cost``: the problem's cost hook over the timing sets (solbench.data.cost.cost_summary); null for formulas."""

    source: Literal["hook"] = _req("where flops and bytes came from")
    hook: str = _req("the hook, e.g. 'reference.py:cost'")
    sets: int = _req("timing sets the hook was run on (the record's flops and bytes are their mean)")
    flops_min: int = _req("the fewest FLOPs of a set")
    flops_max: int = _req("the most FLOPs of a set")
    bytes_min: int = _req("the fewest bytes of a set")
    bytes_max: int = _req("the most bytes of a set")


class GitInfo(_Strict):
    """``git``: the candidate's repository (solbench.engine.provenance); null outside one."""

    commit: str = _req("HEAD's commit")
    dirty: bool | None = _f("tracked files changed since it (null: not checked)")
    dirty_note: str | None = _f("why dirty was not checked")
    committed_at: str | None = _f("the commit's time, ISO 8601")
    branch: str | None = _f("the branch checked out")


PARTS: dict[str, type[BaseModel]] = {"timing": Timing, "correctness": Correctness, "telemetry": Telemetry,
                                     "environment": Environment, "harness": Harness}
