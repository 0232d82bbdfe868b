"""The result record (v1): one JSON object per line in ``results/*.jsonl``.

Top-level keys are the contract of DESIGN.md; details nest below (``timing``, ``correctness``,
``telemetry``, ``environment``, ``harness``, ``log``), each part typed by a model here (its known keys
checked, the JSON Schema generated from it). A record declares every top-level key; one of an older
``record_version`` is read through :func:`upgrade`, one of a newer version by its known keys (the rest kept).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from solbench.data.profile import Profile

RECORD_VERSION = 1


class Status(str, Enum):
    PASSED = "PASSED"
    INCORRECT = "INCORRECT"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"


class EdgeRoundEntry(BaseModel):
    """One edge round of a record (solbench.engine.edge)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(description="e.g. 'large 1e+04', 'offset 3000', 'tiny 1e-15', 'zeros', 'specials -inf', "
                                  "'permuted', 'strided', 'broadcast'")
    shape: str = Field(description="'small' (the workload shrunk by the problem's test_axes) or the workload's name")
    axes: dict[str, int] = Field(default_factory=dict)
    reason: str | None = Field(default=None, description="skipped: why the reference's own output does not count; "
                                                         "failed: what was wrong")


class EdgeReport(BaseModel):
    """``correctness.edge``: the edge rounds run and passed, skipped (and why), and failed."""

    model_config = ConfigDict(extra="allow")

    run: list[EdgeRoundEntry] = Field(default_factory=list, description="rounds that passed")
    skipped: list[EdgeRoundEntry] = Field(default_factory=list)
    failed: list[EdgeRoundEntry] = Field(default_factory=list, description="at most one: the first failure ends "
                                                                           "the evaluation")


class Baseline(BaseModel):
    """The library a baseline candidate (``lib_<library>_<op>.py``, ``BASELINE = "..."``) measures."""

    library: str = Field(description="the library's distribution name, e.g. 'torch', 'liger-kernel'")
    version: str = Field(description="its installed version where the record was made ('unknown' if not found)")


# --- the record's parts: each key the engine writes, typed; validated on every record, in the JSON Schema ----
class _Part(BaseModel):
    """A part of the record: its known keys are typed and checked; the record keeps the part as a dict (keys a
    newer engine adds are kept, not checked)."""


class Timing(_Part):
    """``timing``: how the median was measured (solbench.timing; docs/timing.md)."""

    samples_s: list[float] | None = Field(None, description="every timed sample, seconds per call")
    median_s: float | None = None
    p10_s: float | None = None
    p90_s: float | None = None
    iqr_s: float | None = None
    min_s: float | None = None
    mean_s: float | None = None
    n: int | None = Field(None, description="number of samples")
    ci95_rel: float | None = Field(None, description="95% CI of the median, relative; null when unknown")
    method: str | None = Field(None, description="cpu, events or graph")
    method_reason: str | None = None
    flush_bytes: int | None = Field(None, description="bytes written to flush the L2 before each sample")
    warmup_calls: int | None = None
    stop_reason: str | None = None
    clock: dict[str, Any] | None = Field(None, description="SM clocks read around sample chunks (CUDA)")
    cupti: dict[str, Any] | None = Field(None, description="CUPTI activity records: every stream's time (CUDA)")
    flags: list[str] | None = None
    details: dict[str, Any] | None = Field(None, description="method-specific extras (sleep, graph batch, ...)")
    overhead_subtracted_s: float | None = Field(None, description="per call, already taken off every sample")
    interleave: dict[str, Any] | None = Field(None, description="with --interleave: the round and position")


class Correctness(_Part):
    """``correctness``: the rounds' comparisons with the reference, the timed outputs' re-check, the edge rounds."""

    passed: bool | None = None
    rounds: list[dict[str, Any]] | int | None = Field(None, description="the correctness rounds' comparisons")
    atol: float | None = None
    rtol: float | None = None
    max_mismatch_ratio: float | None = None
    failed_in: str | None = Field(None, description="the phase that failed")
    findings: list[dict[str, Any]] | None = Field(None, description="the guards' findings")
    timed: dict[str, Any] | None = Field(None, description="the re-check of outputs kept during timing")
    edge: EdgeReport | None = None


class Telemetry(_Part):
    """``telemetry``: NVML's power, clocks and temperature over the timed window (CUDA)."""

    available: bool | None = None
    reason: str | None = None
    samples: int | None = None
    interval_s: float | None = None
    duration_s: float | None = None
    sm_min_mhz: float | None = None
    sm_max_mhz: float | None = None
    mem_min_mhz: float | None = None
    mem_max_mhz: float | None = None
    power_min_w: float | None = None
    power_max_w: float | None = None
    avg_power_w: float | None = None
    energy_j: float | None = None
    temperature_min_c: float | None = None
    temperature_max_c: float | None = None
    power_throttled: bool | None = None
    thermal_throttled: bool | None = None
    clocks_event_reasons: int | None = None
    clocks_event_reason_names: list[str] | None = None


class Environment(_Part):
    """``environment``: where the record was made (device, driver, versions, host)."""

    device_type: str | None = None
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    gpu_index: int | None = None
    gpu_count: int | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    power_limit_w: float | None = None
    persistence_mode: Any = None
    mig_mode: Any = None
    driver: str | None = None
    cuda: str | None = None
    cuda_visible_devices: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    hostname: str | None = None
    platform: str | None = None
    python: str | None = None
    torch: str | None = None
    triton: str | None = None
    cupy: str | None = None
    solbench: str | None = None
    packages: dict[str, Any] | None = None
    seed: Any = None


class Harness(_Part):
    """``harness``: seconds the harness spent on this record, by phase (not the candidate's time)."""

    worker_start_s: float | None = Field(None, description="the worker's whole start (mostly before this record)")
    memory_wait_s: float | None = None
    memory_retry_s: float | None = None
    cases_s: float | None = Field(None, description="the inputs and reference outputs")
    worker_wait_s: float | None = None
    load_s: float | None = Field(None, description="the worker importing the candidate")
    setup_s: float | None = None
    first_call_s: float | None = Field(None, description="the first call (part of rounds_s)")
    rounds_s: float | None = Field(None, description="the correctness rounds")
    timing_request_s: float | None = Field(None, description="the timing window")
    recheck_s: float | None = None
    burst_s: float | None = None
    edge_prepare_s: float | None = None
    edge_s: float | None = None
    device_wait_s: float | None = None
    verdict_s: float | None = None
    wall_s: float | None = Field(None, description="the record's whole wall time")
    transport: str | None = Field(None, description="device or memfd: how tensors moved to the worker")


def _typed(model: type[_Part]) -> Any:
    """A record field holding ``model``'s keys as a dict (how the engine fills it); its JSON Schema is the
    model's, field by field."""
    return Annotated[dict[str, Any], WithJsonSchema(_inlined(model.model_json_schema()))]


def _inlined(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """``schema`` with its ``$ref``s to its own ``$defs`` replaced by what they name (it is embedded elsewhere)."""
    if isinstance(schema, dict):
        defs = schema.get("$defs", defs)
        if "$ref" in schema and defs is not None:
            return _inlined(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inlined(v, defs) for k, v in schema.items() if k != "$defs"}
    return [_inlined(v, defs) for v in schema] if isinstance(schema, list) else schema


def _part(description: str) -> Any:
    return Field(default_factory=dict, description=description)


class ResultRecord(BaseModel):
    """One (candidate, problem, workload) result."""

    model_config = ConfigDict(extra="forbid", use_enum_values=True)

    problem: str
    workload: str
    solution: str = Field(description="candidate name (file stem, or the name given)")
    status: Status
    device: str = Field(description="device name as reported, e.g. 'NVIDIA H200' or the CPU model")
    gpu_spec: str | None = Field(description="spec id the score is computed against")
    time_s: float | None = Field(description="median time of one call; null unless PASSED")
    sol: float | None = Field(description="T_ideal / time_s; null unless PASSED")
    flops: int
    bytes: int
    t_ideal_s: float
    bound: str
    timestamp: str = Field(description="ISO 8601, UTC")
    solbench_version: str

    # Beyond the contract's minimum: useful everywhere, so kept at the top level.
    record_version: int = RECORD_VERSION
    run_id: str | None = None
    solution_path: str | None = None
    solution_sha256: str | None = None
    device_type: str = "cuda"
    axes: dict[str, int] = Field(default_factory=dict)
    compute_dtype: str | None = None
    roof: str = Field(default="datasheet", description="'datasheet' or 'measured': which spec's roof")
    arithmetic_intensity: float | None = None
    t_compute_s: float | None = None
    t_memory_s: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    t_floor_s: float | None = Field(default=None, description="launch floor of the timing method: the least "
                                    "time an empty call reads (attainable SOL = max(t_ideal_s, t_floor_s) / time_s)")
    t_floor_basis: str | None = Field(default=None, description="where t_floor_s comes from (spec key or default)")
    cost: dict[str, Any] | None = Field(default=None, description="when the problem's cost hook gave flops and "
                                        "bytes: their mean over the timing sets, and the spread (source, hook, sets, "
                                        "flops_min/max, bytes_min/max); null for formulas")
    baseline: Baseline | None = Field(default=None, description="set for a library baseline: the reference "
                                      "point of the 'best known' columns; null for other candidates")
    git: dict[str, Any] | None = Field(default=None, description="the candidate's git repository: commit, dirty, "
                                       "commit time; null outside a repository")
    device_index: int | None = Field(default=None, description="the GPU's index on its host, from an executor of "
                                     "`solbench run --gpus/--jobs/--cluster` (null: a plain run)")
    host: str | None = Field(default=None, description="the host of that executor")
    reason: str | None = Field(default=None, description="one line: why it did not pass")
    flags: list[str] = Field(default_factory=list, description="e.g. 'power_throttled', 'cupti_mismatch'")
    tags: list[str] = Field(default_factory=list)
    timing: _typed(Timing) = _part("how the median was measured")
    correctness: _typed(Correctness) = _part("the rounds' comparisons, the timed outputs' re-check, "
                                                          "and `edge` (the edge rounds)")
    telemetry: _typed(Telemetry) = _part("NVML's power, clocks and temperature over the timed window")
    environment: _typed(Environment) = _part("where the record was made")
    harness: _typed(Harness) = _part("the harness's own seconds, by phase")
    log: str = ""
    profile: Profile | None = Field(default=None, description="Nsight Compute counters of one call, per kernel "
                                                              "and summed (`solbench profile`; docs/profiling.md)")

    @field_validator("timing", "correctness", "telemetry", "environment", "harness")
    @classmethod
    def _typed_part(cls, v: dict[str, Any], info: Any) -> dict[str, Any]:
        """Each part's known keys have their types (checked here); ``correctness.edge`` is an :class:`EdgeReport`."""
        PARTS[info.field_name].model_validate(v)
        if info.field_name == "correctness" and "edge" in v:
            v = {**v, "edge": EdgeReport.model_validate(v["edge"]).model_dump()}
        return v

    @model_validator(mode="after")
    def _null_unless_passed(self) -> ResultRecord:
        if self.status != Status.PASSED.value and (self.time_s is not None or self.sol is not None):
            raise ValueError("time_s and sol must be null unless status is PASSED")
        if self.status == Status.PASSED.value and (self.time_s is None or self.sol is None):
            raise ValueError("a PASSED record needs time_s and sol")
        return self

    def to_json_line(self) -> str:
        return self.model_dump_json() + "\n"


PARTS: dict[str, type[_Part]] = {"timing": Timing, "correctness": Correctness, "telemetry": Telemetry,
                                 "environment": Environment, "harness": Harness}


def upgrade(obj: dict[str, Any]) -> dict[str, Any]:
    """A record of an older ``record_version`` as this version reads it.

    Version 0 (no ``record_version``, the first records): some wrote the status in lower case ("passed")."""
    status = obj.get("status")
    if isinstance(status, str) and not status.isupper():
        obj = {**obj, "status": status.upper()}
    return obj if obj.get("record_version") not in (None, 0) else {**obj, "record_version": RECORD_VERSION}


def checkable(obj: dict[str, Any]) -> dict[str, Any]:
    """What this version checks of a record: all of it, or a newer ``record_version``'s keys this version knows
    (so a newer record still loads; its other keys are kept, unchecked)."""
    version = obj.get("record_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > RECORD_VERSION:
        return {k: v for k, v in obj.items() if k in ResultRecord.model_fields}
    return obj
