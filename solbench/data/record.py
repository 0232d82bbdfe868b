"""The result record (v2): one JSON object per line in ``results/*.jsonl``.

Top-level keys are the contract of DESIGN.md; details nest below (``timing``, ``correctness``,
``telemetry``, ``environment``, ``harness``, ``log``), each part typed key by key by a model of
:mod:`solbench.data.record_parts` (an undeclared key is refused; the JSON Schema is generated from them).
A record is checked against its status too (:meth:`ResultRecord._by_status`). One of an older
``record_version`` is read through :func:`upgrade`; one of a newer version by the keys this version knows
(its other keys kept, unchecked: :func:`newer_version`).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, WrapValidator, model_validator

from solbench.data.profile import Profile
from solbench.data.record_parts import (
    Correctness,
    CostSummary,
    Environment,
    GitInfo,
    Harness,
    Telemetry,
    Timing,
)

# 2: every part's keys declared (v1 records' ``correctness.timed.sets_checked`` is ``outputs_checked``).
RECORD_VERSION = 2


class Status(str, Enum):
    PASSED = "PASSED"
    INCORRECT = "INCORRECT"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"


class Baseline(BaseModel):
    """The library a baseline candidate (``lib_<library>_<op>.py``, ``BASELINE = "..."``) measures."""

    library: str = Field(description="the library's distribution name, e.g. 'torch', 'liger-kernel'")
    version: str = Field(description="its installed version where the record was made ('unknown' if not found)")


def _typed(model: type[BaseModel], nullable: bool = False) -> Any:
    """A record field holding ``model``'s keys as the dict the engine filled (or null, when ``nullable``),
    checked by ``model`` (an undeclared key or a wrong type is an error at its path); its JSON Schema is the
    model's, field by field."""

    def check(value: Any, handler: Any) -> Any:
        value = handler(value)
        if value is not None:
            model.model_validate(value)
        return value

    schema = _inlined(model.model_json_schema())
    if nullable:
        return Annotated[dict[str, Any] | None, WrapValidator(check),
                         WithJsonSchema({"anyOf": [schema, {"type": "null"}]})]
    return Annotated[dict[str, Any], WrapValidator(check), WithJsonSchema(schema)]


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
    cost: _typed(CostSummary, nullable=True) = Field(default=None, description="when the problem's cost hook "
                                                     "gave flops and bytes: their spread over the timing sets "
                                                     "(flops and bytes are the mean); null for formulas")
    baseline: Baseline | None = Field(default=None, description="set for a library baseline: the reference "
                                      "point of the 'best known' columns; null for other candidates")
    git: _typed(GitInfo, nullable=True) = Field(default=None, description="the candidate's git repository: "
                                                "commit, dirty, commit time; null outside a repository")
    device_index: int | None = Field(default=None, description="the GPU's index on its host, from an executor of "
                                     "`solbench run --gpus/--jobs/--cluster` (null: a plain run)")
    host: str | None = Field(default=None, description="the host of that executor")
    reason: str | None = Field(default=None, description="one line: why it did not pass")
    flags: list[str] = Field(default_factory=list, description="e.g. 'power_throttled', 'cupti_mismatch'")
    tags: list[str] = Field(default_factory=list)
    timing: _typed(Timing) = _part("how the median was measured")
    correctness: _typed(Correctness) = _part("the rounds' comparisons, the timed outputs' re-check, the "
                                             "parent-clocked `burst`, the guards' `findings`, the `edge` rounds")
    telemetry: _typed(Telemetry) = _part("NVML's power, clocks and temperature over the timed window (CUDA); "
                                         "the machine's load (CPU)")
    environment: _typed(Environment) = _part("where the record was made")
    harness: _typed(Harness) = _part("the harness's own seconds, by phase")
    log: str = ""
    profile: Profile | None = Field(default=None, description="Nsight Compute counters of one call, per kernel "
                                                              "and summed (`solbench profile`; docs/profiling.md)")

    @model_validator(mode="after")
    def _by_status(self) -> ResultRecord:
        """What a record of its status must hold: a PASSED one its time (the timing's median) and SOL, and no
        failed check; any other its reason and no time."""
        if self.status != Status.PASSED.value:
            if self.time_s is not None or self.sol is not None:
                raise ValueError(f"status {self.status}: time_s and sol must be null unless PASSED")
            if not self.reason:
                raise ValueError(f"status {self.status} needs a reason (one line: why it did not pass)")
            return self
        if self.time_s is None or self.sol is None:
            raise ValueError("a PASSED record needs time_s and sol")
        if self.reason:
            raise ValueError("a PASSED record has no reason (reason is why a record did not pass)")
        median = self.timing.get("median_s")
        if median is not None and not math.isclose(median, self.time_s, rel_tol=1e-9):
            raise ValueError(f"a PASSED record's time_s ({self.time_s:g}) is its timing.median_s ({median:g})")
        if self.correctness.get("passed") is False:
            raise ValueError("a PASSED record cannot have correctness.passed false")
        return self

    def to_json_line(self) -> str:
        return self.model_dump_json() + "\n"


def upgrade(obj: dict[str, Any]) -> dict[str, Any]:
    """A record of an older ``record_version`` as this version reads it (a new dict; ``obj`` is not changed).

    Version 0 (no ``record_version``, the first records): some wrote the status in lower case ("passed").
    Versions 0 and 1: ``correctness.timed.sets_checked`` (the timed outputs checked, then the last of each
    set) is ``outputs_checked``."""
    version = obj.get("record_version")
    version = 0 if version is None else version
    if not isinstance(version, int) or isinstance(version, bool) or version >= RECORD_VERSION:
        return obj  # this version's or a newer one's; or not a version (the schema check says so)
    status = obj.get("status")
    if isinstance(status, str) and not status.isupper():
        obj = {**obj, "status": status.upper()}
    correctness = obj.get("correctness")
    timed = correctness.get("timed") if isinstance(correctness, dict) else None
    if isinstance(timed, dict) and "sets_checked" in timed:
        timed = {("outputs_checked" if k == "sets_checked" else k): v for k, v in timed.items()}
        obj = {**obj, "correctness": {**correctness, "timed": timed}}
    return {**obj, "record_version": RECORD_VERSION}


def read_record(obj: dict[str, Any]) -> ResultRecord:
    """A record as this version reads it, from a dict of any version (:func:`upgrade`, :func:`checkable`);
    pydantic's ValidationError when it is not one."""
    return ResultRecord.model_validate(checkable(upgrade(obj)))


def newer_version(obj: dict[str, Any]) -> bool:
    version = obj.get("record_version")
    return isinstance(version, int) and not isinstance(version, bool) and version > RECORD_VERSION


def checkable(obj: dict[str, Any]) -> dict[str, Any]:
    """What this version checks of a record: all of it, or of a newer ``record_version`` all but the keys this
    version does not know, at any depth (so a newer record still loads; its other keys are kept, unchecked)."""
    if not newer_version(obj):
        return obj
    try:
        ResultRecord.model_validate(obj)
    except ValidationError as err:
        unknown = [e["loc"] for e in err.errors(include_url=False, include_input=False)
                   if e["type"] == "extra_forbidden"]
        for loc in unknown:
            obj = _without(obj, loc)
    return obj


def _without(value: Any, loc: tuple[Any, ...]) -> Any:
    """``value`` less the key at path ``loc`` (copied along the path; the rest shared)."""
    head, rest = loc[0], loc[1:]
    if isinstance(value, dict) and head in value:
        return {k: v for k, v in value.items() if k != head} if not rest else {**value, head: _without(value[head], rest)}
    if isinstance(value, list) and isinstance(head, int) and 0 <= head < len(value) and rest:
        return [_without(v, rest) if i == head else v for i, v in enumerate(value)]
    return value
