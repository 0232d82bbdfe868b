"""What the HTML report shows, as plain data for the template: per-problem tables, the environment,
the timing method, the failures. No markup here: the template escapes every value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from .html import clean_text, fmt_si, fmt_sol, one_line
from .leaderboard_render import DisplayTable, display_tables
from .ranking import Leaderboard

LOG_LIMIT = 4000  # characters of a failure's log kept in the report
MAX_FAILURES = 1000  # failure rows listed; the rest are counted


@dataclass
class Cell:
    status: str
    time: str = ""
    sol: str = ""
    tflops: str = ""
    tbps: str = ""
    reason: str = ""
    sol_value: float | None = None


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
    charts: list[tuple[str, str, str]] = field(default_factory=list)  # (data URI, alt text, caption)


def _num(x: object) -> float | None:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def _axes_text(rec: pd.Series) -> str:
    pairs = [(c.split(".", 1)[1], rec[c]) for c in rec.index if c.startswith("axes.") and _num(rec[c]) is not None]
    return ", ".join(f"{k}={int(float(v))}" for k, v in pairs)


def _cell(best_row: pd.Series | None, failure: pd.Series | None) -> Cell | None:
    if best_row is not None:
        t = _num(best_row["time_s"])
        return Cell("PASSED", fmt_si(t, "s"), fmt_sol(_num(best_row["sol"])),
                    _fixed(_num(best_row["achieved_flops_per_s"]), 1e12),
                    _fixed(_num(best_row["achieved_bytes_per_s"]), 1e12), sol_value=_num(best_row["sol"]))
    if failure is not None:
        return Cell(str(failure["status"]), reason=one_line(failure.get("reason") or "", 400))
    return None


def _fixed(x: float | None, scale: float) -> str:
    return "-" if x is None else f"{x / scale:.3g}"


def problem_sections(lb: Leaderboard) -> list[ProblemSection]:
    """One section per (problem, GPU): its ranking and its workloads x candidates table."""
    rankings = {(t.problem, t.gpu): t for t in display_tables(lb) if t.kind == "problem"}
    records = lb.records
    sections = []
    for i, ((prob, gpu), recs) in enumerate(records.groupby(["problem", "gpu"], sort=True)):
        ranking = rankings.get((prob, gpu))
        ranked = lb.problems[(lb.problems["problem"] == prob) & (lb.problems["gpu"] == gpu)]["candidate"].tolist()
        best = lb.best[(lb.best["problem"] == prob) & (lb.best["gpu"] == gpu)]
        best_of = {(w, c): r for (w, c), r in zip(zip(best["workload"], best["solution"], strict=True),
                                                   (r for _, r in best.iterrows()), strict=True)}
        failed = recs[recs["status"] != "PASSED"].sort_values("timestamp", na_position="first")
        fail_of = {(r["workload"], r["solution"]): r for _, r in failed.iterrows()}  # the latest failure wins
        wl = recs.groupby("workload").agg(ai=("arithmetic_intensity", "median"), bound=("bound", "first"),
                                          t_ideal=("t_ideal_s", "median"))
        wl = wl.sort_values("ai", na_position="last")
        first_of = recs.drop_duplicates("workload").set_index("workload")
        rows = []
        for w, info in wl.iterrows():
            ai = _num(info["ai"])
            rows.append(WorkloadRow(
                workload=one_line(w), axes=_axes_text(first_of.loc[w]),
                intensity="-" if ai is None else f"{ai:.3g}", bound=one_line(info["bound"] or "?"),
                t_ideal=fmt_si(_num(info["t_ideal"]), "s"),
                cells=[_cell(best_of.get((w, c)), fail_of.get((w, c))) for c in ranked]))
        tags = sorted({t for ts in recs["tags"] for t in ts})
        device = ", ".join(sorted({one_line(d, 80) for d in recs["device"].dropna()})) or "unknown"
        sections.append(ProblemSection(f"p{i + 1}", one_line(prob), one_line(gpu), device, tags, ranking,
                                       [one_line(c, 60) for c in ranked], rows, key=(prob, gpu)))
    return sections


def _summary(values: pd.Series, limit: int = 4) -> str:
    """Distinct values of one column, or the range of a numeric one."""
    v = values.dropna()
    v = v[v.map(lambda x: not isinstance(x, (list, dict)) or bool(x))]
    if v.empty:
        return ""
    flat = v.map(lambda x: ", ".join(map(str, x)) if isinstance(x, list) else x)
    nums = pd.to_numeric(flat, errors="coerce")
    if nums.notna().all() and flat.nunique() > limit:
        return f"{nums.min():.6g} to {nums.max():.6g} (median {nums.median():.6g})"
    counts = flat.astype(str).value_counts()
    shown = [f"{one_line(k, 120)}" + (f" ({n})" if len(counts) > 1 else "") for k, n in counts.head(limit).items()]
    more = f" ... and {len(counts) - limit} more" if len(counts) > limit else ""
    return "; ".join(shown) + more


def environment_rows(records: pd.DataFrame) -> dict[str, list[tuple[str, str]]]:
    """Per GPU: device, spec, driver and versions, clocks, throttle flags, as (key, value) rows."""
    out: dict[str, list[tuple[str, str]]] = {}
    for gpu, r in records.groupby("gpu", sort=True):
        rows = [("device", _summary(r["device"])), ("spec scored against", _summary(r["gpu_spec"])),
                ("roof", _summary(r["roof"])), ("device type", _summary(r.get("device_type", pd.Series())))]
        for prefix in ("environment.", "telemetry."):
            for col in sorted(c for c in r.columns if c.startswith(prefix)):
                rows.append((col, _summary(r[col])))
        flags = pd.Series([f for fs in r["flags"] for f in fs], dtype=object)
        rows.append(("flags (results carrying each)", _summary(flags, limit=12) or "none"))
        rows.append(("solbench version", _summary(r["solbench_version"])))
        out[one_line(gpu)] = [(k, v) for k, v in rows if v]
    return out


def timing_rows(records: pd.DataFrame) -> list[tuple[str, str]]:
    passed = records[records["status"] == "PASSED"]
    rows = [(c, _summary(passed[c])) for c in sorted(c for c in passed.columns if c.startswith("timing."))]
    return [(k, v) for k, v in rows if v] or [("timing", "no timing details recorded")]


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
        log = clean_text(r.get("log") or "")
        if len(log) > LOG_LIMIT:  # the end of a log says why it failed
            log = f"[{len(log) - LOG_LIMIT} earlier characters cut]\n" + log[-LOG_LIMIT:]
        out.append(Failure(str(r["status"]), one_line(r["problem"]), one_line(r["workload"]), one_line(r["solution"]),
                           one_line(r["gpu"]), one_line(r.get("reason") or "", 400), log,
                           one_line(r.get("timestamp") or "")))
    return out, len(failed)
