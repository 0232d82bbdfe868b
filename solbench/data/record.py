"""The result record (v1): one JSON object per line in ``results/*.jsonl``.

Top-level keys are the contract of DESIGN.md; details nest below (``timing``, ``correctness``,
``telemetry``, ``environment``, ``log``). Unknown keys are kept, so newer records load in older
code and the other way round.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


class ResultRecord(BaseModel):
    """One (candidate, problem, workload) result."""

    model_config = ConfigDict(extra="allow", use_enum_values=True)

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
    timing: dict[str, Any] = Field(default_factory=dict)
    correctness: dict[str, Any] = Field(default_factory=dict, description="the rounds' comparisons, the timed "
                                        "outputs' re-check, and `edge` (an EdgeReport: the edge rounds)")
    telemetry: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    log: str = ""
    profile: Profile | None = Field(default=None, description="Nsight Compute counters of one call, per kernel "
                                                              "and summed (`solbench profile`; docs/profiling.md)")

    @field_validator("correctness")
    @classmethod
    def _typed_edge(cls, v: dict[str, Any]) -> dict[str, Any]:
        """``correctness.edge`` (when there) is an :class:`EdgeReport`."""
        if "edge" in v:
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
