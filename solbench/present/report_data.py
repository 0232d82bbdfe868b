"""What the HTML report shows, as plain data for the template: per-problem tables, the environment,
the timing method, the failures. No markup here: the template escapes every value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from solbench.present.field_labels import group_of, human_label, number_format
from solbench.present.leaderboard import DisplayTable, display_tables
from solbench.present.markup import clean_text, one_line
from solbench.present.ranking import Leaderboard
from solbench.units import si, sol_text

LOG_LIMIT = 4000  # characters of a failure's log kept in the report
MAX_FAILURES = 1000  # failure rows listed; the rest are counted
SHORT_LIST = 6  # list values up to this long are shown; longer ones only by their size


@dataclass
class Cell:
    status: str
    time: str = ""
    sol: str = ""
    tflops: str = ""
    tbps: str = ""
    reason: str = ""
    sol_value: float | None = None
    attainable: str = ""  # SOL against max(T_ideal, launch floor), when T_ideal is below the floor
    noisy: str = ""  # why the time is too noisy to rank on ('' when it is not)

    @property
    def bar(self) -> float:
        """The SOL bar's length, percent of the cell, linear (capped at 100: SOL > 1 is flagged elsewhere).
        The page draws any length above 0 at least 2 px wide, so a tiny SOL is seen, not lost."""
        return 0.0 if self.sol_value is None else round(100 * min(1.0, max(0.0, self.sol_value)), 1)


@dataclass
class WorkloadRow:
    workload: str
    axes: str
    intensity: str
    bound: str
    t_ideal: str
    cells: list[Cell | None]


@dataclass
class ProblemSection:
    anchor: str
    problem: str
    gpu: str
    device: str
    tags: list[str]
    ranking: DisplayTable | None
    candidates: list[str]
    rows: list[WorkloadRow]
    key: tuple[str, str] = ("", "")  # the raw (problem, gpu) of its records
    note: str = ""
    charts: list[tuple[str, str, str]] = field(default_factory=list)  # (data URI, alt text, caption)

    @property
    def noisy(self) -> int:
        """Cells whose time is too noisy to rank on."""
        return sum(1 for r in self.rows for c in r.cells if c is not None and c.noisy)


def _num(x: object) -> float | None:
    """A finite float, or None (record values can be anything)."""
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def _axes_text(rec: dict, axes_cols: list[str]) -> str:
    pairs = [(c.split(".", 1)[1], _num(rec[c])) for c in axes_cols]
    return one_line(", ".join(f"{k}={int(v)}" for k, v in pairs if v is not None), 300)


def _attainable(best: dict) -> str:
    floor, ideal, att = _num(best.get("t_floor_s")), _num(best.get("t_ideal_s")), _num(best.get("attainable_sol"))
    return sol_text(att) if floor is not None and ideal is not None and att is not None and floor > ideal else ""


def _cell(best: dict | None, failure: dict | None) -> Cell | None:
    if best is not None:
        sol = _num(best["sol"])
        return Cell("PASSED", si(_num(best["time_s"]), "s"), sol_text(sol),
                    _rate(_num(best["achieved_flops_per_s"]), "FLOP/s"),
                    _rate(_num(best["achieved_bytes_per_s"]), "B/s"), sol_value=sol, attainable=_attainable(best),
                    noisy=one_line(best.get("noisy") or "", 200) if isinstance(best.get("noisy"), str) else "")
    if failure is not None:
        return Cell(str(failure["status"]), reason=one_line(failure.get("reason") or "", 400))
    return None


def _rate(x: float | None, unit: str) -> str:
    """A rate with its own prefix (a CPU's 265 MFLOP/s, not 0.000265 TFLOP/s)."""
    return "-" if x is None else si(x, unit)


CELL_COLUMNS = ["workload", "solution", "status", "reason", "time_s", "sol", "achieved_flops_per_s",
                "achieved_bytes_per_s", "t_floor_s", "t_ideal_s", "attainable_sol", "noisy"]


def problem_sections(lb: Leaderboard) -> list[ProblemSection]:
    """One section per (problem, GPU): its ranking and its workloads x candidates table.

    Everything is grouped once over all records (a report can have a hundred sections)."""
    keys = ["problem", "gpu"]
    records = lb.records
    rankings = {(t.problem, t.gpu): t for t in display_tables(lb) if t.kind == "problem"}
    ranked_of: dict[tuple, list[str]] = {}
    for r in lb.problems[[*keys, "candidate"]].to_dict("records"):
        ranked_of.setdefault((r["problem"], r["gpu"]), []).append(r["candidate"])
    cell_cols = [*keys, *CELL_COLUMNS]
    best_of = {(r["problem"], r["gpu"], r["workload"], r["solution"]): r for r in lb.best.reindex(columns=cell_cols).to_dict("records")}
    failed = records[records["status"] != "PASSED"].sort_values("timestamp", na_position="first")
    # The latest failure of a cell wins (dict insertion follows the sort).
    fail_of = {(r["problem"], r["gpu"], r["workload"], r["solution"]): r for r in failed.reindex(columns=cell_cols).to_dict("records")}
    axes_cols = [c for c in records.columns if c.startswith("axes.")]
    first_of = {(r["problem"], r["gpu"], r["workload"]): r for r in
                records.drop_duplicates([*keys, "workload"])[[*keys, "workload", *axes_cols]].to_dict("records")}
    wl = (records.groupby([*keys, "workload"]).agg(ai=("arithmetic_intensity", "median"), bound=("bound", "first"),
                                                   t_ideal=("t_ideal_s", "median"))
          .reset_index().sort_values([*keys, "ai"], na_position="last"))
    workloads_of: dict[tuple, list[dict]] = {}
    for r in wl.to_dict("records"):
        workloads_of.setdefault((r["problem"], r["gpu"]), []).append(r)
    meta = records.groupby(keys).agg(tags=("tags", lambda s: sorted({one_line(t, 60) for ts in s for t in ts})),
                                     device=("device", lambda s: sorted({one_line(d, 80) for d in s.dropna()})))
    sections = []
    for i, ((prob, gpu), info) in enumerate(meta.sort_index().iterrows()):
        ranked = ranked_of.get((prob, gpu), [])
        rows = []
        for w in workloads_of[(prob, gpu)]:
            name, ai = w["workload"], _num(w["ai"])
            rows.append(WorkloadRow(
                workload=one_line(name), axes=_axes_text(first_of[(prob, gpu, name)], axes_cols),
                intensity="-" if ai is None else f"{ai:.3g}", bound=one_line(w["bound"] or "?"),
                t_ideal=si(_num(w["t_ideal"]), "s"),
                cells=[_cell(best_of.get((prob, gpu, name, c)), fail_of.get((prob, gpu, name, c))) for c in ranked]))
        sections.append(ProblemSection(f"p{i + 1}", one_line(prob), one_line(gpu), ", ".join(info["device"]) or
                                       "unknown", info["tags"], rankings.get((prob, gpu)),
                                       [one_line(c, 60) for c in ranked], rows, key=(prob, gpu)))
    return sections


def _summary(values: pd.Series, limit: int = 4, number: Callable[[float], str] = lambda x: f"{x:.6g}") -> str:
    """Distinct values of one column, the range of a numeric one, or the sizes of a list-valued one
    (a list of timing samples is data for a chart, not for a table). ``number``: how a number reads."""
    v = values.dropna()
    if pd.api.types.is_numeric_dtype(v.dtype) and not pd.api.types.is_bool_dtype(v.dtype):
        if v.empty:
            return ""
        if v.nunique() > limit:
            return f"{number(v.min())} to {number(v.max())} (median {number(v.median())})"
        v = v.map(number)
    v = v[v.map(lambda x: not isinstance(x, (list, dict)) or bool(x))]
    if v.empty:
        return ""
    if v.map(lambda x: isinstance(x, dict)).any():
        return ""
    if v.map(lambda x: isinstance(x, list) and len(x) > SHORT_LIST).any():
        sizes = v.map(lambda x: len(x) if isinstance(x, list) else 1)
        return f"lists of {sizes.min()} to {sizes.max()} values" if sizes.min() != sizes.max() else \
            f"lists of {sizes.max()} values"
    flat = v.map(lambda x: ", ".join(map(str, x)) if isinstance(x, list) else x)
    try:
        nums = pd.to_numeric(flat, errors="coerce")
    except (OverflowError, TypeError, ValueError):  # an integer beyond a double
        nums = flat.map(_num)
    if nums.notna().all() and flat.nunique() > limit:
        return f"{number(nums.min())} to {number(nums.max())} (median {number(nums.median())})"
    counts = flat.astype(str).value_counts()
    shown = [f"{one_line(k, 120)}" + (f" ({n})" if len(counts) > 1 else "") for k, n in counts.head(limit).items()]
    more = f" ... and {len(counts) - limit} more" if len(counts) > limit else ""
    return "; ".join(shown) + more


@dataclass
class Field:
    label: str  # what a reader calls it, with no dotted key
    value: str  # with its unit
    key: str = ""  # the record's dotted key, shown on hover


@dataclass
class FieldGroup:
    heading: str
    fields: list[Field]


def _field(key: str, values: pd.Series) -> Field:
    # The label is derived from the key, which comes from the records: cleaned like any of their text.
    return Field(one_line(human_label(key), 80), _summary(values, number=number_format(key)), one_line(key, 80))


def _grouped(fields: list[tuple[str, Field]]) -> list[FieldGroup]:
    """Fields under their group headings, in the order the groups first appear; empty values dropped."""
    groups: dict[str, list[Field]] = {}
    for heading, f in fields:
        if f.value:
            groups.setdefault(heading, []).append(f)
    return [FieldGroup(h, fs) for h, fs in groups.items()]


def environment_rows(records: pd.DataFrame) -> dict[str, list[FieldGroup]]:
    """Per GPU: device, spec, driver and versions, clocks, throttle flags, in labelled groups with units."""
    out: dict[str, list[FieldGroup]] = {}
    for gpu, r in records.groupby("gpu", sort=True):
        rows = [("Scored against", Field(label, _summary(r[col]) if col in r.columns else "", col))
                for label, col in (("device", "device"), ("spec file", "gpu_spec"), ("roof", "roof"),
                                   ("device type", "device_type"))]
        for prefix in ("environment.", "telemetry."):
            cols = [c for c in r.columns if c.startswith(prefix)]
            for col in sorted(cols, key=lambda c: (c.startswith("environment.packages."),
                                                   c.removeprefix(prefix) not in ENVIRONMENT_FIRST, c)):
                rows.append((group_of(col)[0], _field(col, r[col])))
        flags = pd.Series([f for fs in r["flags"] for f in fs], dtype=object)
        rows.append(("Scored against", Field("flags (results carrying each)", _summary(flags, limit=12) or "none",
                                             "flags")))
        rows.append(("Scored against", Field("solbench version", _summary(r["solbench_version"]), "solbench_version")))
        out[one_line(gpu)] = _grouped(rows)
    return out


# What a reader checks first about the machine; the rest follows alphabetically.
ENVIRONMENT_FIRST = {"gpu_name", "uuid", "driver", "cuda", "torch", "triton", "cupy", "hostname", "sm_min_mhz",
                     "sm_max_mhz", "power_throttled", "thermal_throttled", "clocks_event_reason_names"}
# Per-measurement statistics: in the tables already, and meaningless summed up over results.
TIMING_STATISTICS = {"timing.samples_s", "timing.median_s", "timing.p10_s", "timing.p90_s", "timing.iqr_s",
                     "timing.min_s", "timing.mean_s"}
TIMING_FIRST = ("timing.method", "timing.method_reason", "timing.n", "timing.ci95_rel", "timing.stop_reason",
                "timing.warmup_calls", "timing.flush_bytes")


def timing_rows(records: pd.DataFrame) -> list[FieldGroup]:
    """How the times were taken: method, why, flush size, warm-up, stopping rule, sample counts; in groups."""
    passed = records[records["status"] == "PASSED"]
    cols = sorted((c for c in passed.columns if c.startswith("timing.") and c not in TIMING_STATISTICS),
                  key=lambda c: (c.count("."), TIMING_FIRST.index(c) if c in TIMING_FIRST else len(TIMING_FIRST), c))
    groups = _grouped([(group_of(c)[0], _field(c, passed[c])) for c in cols])
    return groups or [FieldGroup("Timing", [Field("timing", "no timing details recorded")])]


@dataclass
class Failure:
    status: str
    problem: str
    workload: str
    candidate: str
    gpu: str
    reason: str
    log: str
    when: str


def failures(records: pd.DataFrame) -> tuple[list[Failure], int]:
    """Failed results (capped at MAX_FAILURES) with their reason and the tail of their log, and the total."""
    failed = records[records["status"] != "PASSED"].sort_values(["problem", "solution", "workload", "timestamp"],
                                                               na_position="first")
    out = []
    for _, r in failed.head(MAX_FAILURES).iterrows():
        log = str(r.get("log") or "")
        if len(log) > LOG_LIMIT:  # the end of a log says why it failed
            log = f"[{len(log) - LOG_LIMIT} earlier characters cut]\n" + log[-LOG_LIMIT:]
        log = clean_text(log)
        out.append(Failure(str(r["status"]), one_line(r["problem"]), one_line(r["workload"]), one_line(r["solution"]),
                           one_line(r["gpu"]), one_line(r.get("reason") or "", 400), log,
                           one_line(r.get("timestamp") or "")))
    return out, len(failed)
