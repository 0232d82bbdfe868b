"""Result records as a pandas DataFrame, and the one Selection the leaderboard, plots and report share.

``load_results`` reads JSONL files or folders tolerantly (a bad line is a warning, never a crash),
flattens nested fields with dotted names (``timing.method``, ``environment.driver``), and fills in
what older records lack from what they do carry (intensity from FLOPs and bytes, achieved rates
from the time). Records are untrusted input: numbers that are not numbers become NaN, and a PASSED
record without a usable time is dropped with a warning rather than ranked.
"""

from __future__ import annotations

import fnmatch
import math
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from solbench.data.library import library_tags
from solbench.data.record import Status
from solbench.data.results import read_records
from solbench.errors import SolbenchError, SpecError

CONTRACT_COLUMNS = ("problem", "workload", "solution", "status", "device", "gpu_spec", "time_s", "sol",
                    "flops", "bytes", "t_ideal_s", "bound", "timestamp", "solbench_version")
NUMERIC_COLUMNS = ("time_s", "sol", "flops", "bytes", "t_ideal_s", "t_compute_s", "t_memory_s",
                   "arithmetic_intensity", "achieved_flops_per_s", "achieved_bytes_per_s")
TEXT_COLUMNS = ("problem", "workload", "solution", "status", "device", "gpu_spec", "bound", "timestamp",
                "solbench_version", "roof", "compute_dtype", "reason", "log")
FAILURE_STATUSES = tuple(s.value for s in Status if s is not Status.PASSED)
# Identity of one measurement: the same line read twice (a file and its folder both given) is one record.
_IDENTITY = ("problem", "workload", "solution", "status", "gpu_spec", "roof", "timestamp", "time_s", "run_id")


class ResultsError(SolbenchError):
    """No usable records, or a filter that matches none."""


def load_results(paths: str | Path | Iterable[str | Path], *, warn: bool = True) -> pd.DataFrame:
    """One row per result record from JSONL files or folders of them.

    Unreadable lines and unusable records are skipped; their descriptions are in
    ``df.attrs["warnings"]`` (and raised as Python warnings unless ``warn=False``).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    raw, problems = read_records(list(paths))
    df = records_frame(raw, problems)
    if warn:
        for w in df.attrs["warnings"]:
            warnings.warn(w, stacklevel=2)
    return df


def records_frame(records: Sequence[dict], warnings_in: Sequence[str] = ()) -> pd.DataFrame:
    """The normalised DataFrame of already-parsed record dicts (see :func:`load_results`)."""
    found = list(warnings_in)
    # Two levels (``telemetry.sm_clock_mhz.min``); deeper dicts (per-kernel CUPTI tables keyed by kernel
    # name) stay one cell each rather than becoming a column per kernel name.
    df = pd.json_normalize(list(records), sep=".", max_level=2) if records else pd.DataFrame()
    if "_source" in df.columns:
        df = df.rename(columns={"_source": "source"})
    for col in (*CONTRACT_COLUMNS, *NUMERIC_COLUMNS, *TEXT_COLUMNS, "source", "run_id", "tags", "flags"):
        if col not in df.columns:
            df[col] = None
    for col in NUMERIC_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
        df.loc[~np.isfinite(df[col]), col] = np.nan
    for col in TEXT_COLUMNS:
        df[col] = df[col].map(_text).astype(object)
    df["status"] = df["status"].map(lambda s: s.upper() if isinstance(s, str) else s)
    df["roof"] = df["roof"].fillna("datasheet")
    df["tags"] = df["tags"].map(_string_list)
    df["flags"] = df["flags"].map(_string_list)
    df["gpu"] = [_gpu_id(spec, device) for spec, device in zip(df["gpu_spec"], df["device"], strict=True)]

    unknown = ~df["status"].isin([s.value for s in Status])
    for src, st in zip(df.loc[unknown, "source"], df.loc[unknown, "status"], strict=True):
        found.append(f"{src}: unknown status {st!r}, record skipped")
    unusable = (df["status"] == Status.PASSED.value) & ~((df["time_s"] > 0) & (df["sol"] > 0))
    for src in df.loc[unusable, "source"]:
        found.append(f"{src}: PASSED without a positive time_s and sol, record skipped")
    df = df[~unknown & ~unusable]
    missing = df["problem"].isna() | df["workload"].isna() | df["solution"].isna()
    for src in df.loc[missing, "source"]:
        found.append(f"{src}: no problem/workload/solution, record skipped")
    df = df[~missing]

    subset = [c for c in _IDENTITY if c in df.columns]
    df = df.drop_duplicates(subset=subset).reset_index(drop=True)
    _fill_derived(df)
    df.attrs["warnings"] = found
    return df


def _text(v: object) -> object:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v if isinstance(v, str) else str(v)


def _string_list(v: object) -> list[str]:
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    if isinstance(v, str) and v:
        return [v]
    return []


def _fill_derived(df: pd.DataFrame) -> None:
    """What older records lack, computed from what they carry (never overriding a recorded value)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ai = df["flops"] / df["bytes"].where(df["bytes"] > 0)
        df["arithmetic_intensity"] = df["arithmetic_intensity"].fillna(ai)
        passed = df["status"] == Status.PASSED.value
        df["achieved_flops_per_s"] = df["achieved_flops_per_s"].fillna((df["flops"] / df["time_s"]).where(passed))
        df["achieved_bytes_per_s"] = df["achieved_bytes_per_s"].fillna((df["bytes"] / df["time_s"]).where(passed))
    df["timestamp_utc"] = pd.to_datetime(df["timestamp"], errors="coerce", utc=True, format="ISO8601")


@lru_cache(maxsize=256)
def _base_spec_id(spec_id: str, spec_path_env: str | None) -> str:
    """A measured spec's datasheet id (``based_on``), so datasheet and measured records share a GPU.

    ``spec_path_env`` ($SOLBENCH_SPECS) is part of the cache key: it changes where specs are found.
    """
    from solbench.data.hardware import load_spec

    try:
        spec = load_spec(spec_id)
    except (SpecError, OSError):
        return spec_id
    return spec.based_on if spec.kind == "measured" and spec.based_on else spec_id


def _gpu_id(gpu_spec: object, device: object) -> str:
    if isinstance(gpu_spec, str) and gpu_spec:
        return _base_spec_id(gpu_spec, os.environ.get("SOLBENCH_SPECS"))
    return str(device) if isinstance(device, str) and device else "unknown"


def pick_roof(df: pd.DataFrame, roof: str | None) -> str:
    """The roof to score against: the one asked for, else datasheet when present, else measured (or
    whatever single roof the records have, e.g. a CPU 'estimate')."""
    present = set(df["roof"].dropna().unique())
    if roof is not None:
        if roof not in present:
            have = ", ".join(sorted(present)) or "none"
            raise ResultsError(f"--roof {roof}: no records scored against that roof (these have: {have}); "
                               f"pass --roof {sorted(present)[0] if present else 'datasheet'}")
        return roof
    for preferred in ("datasheet", "measured"):
        if preferred in present:
            return preferred
    return sorted(present)[0] if present else "datasheet"


def _patterns(value: Sequence[str] | str | None) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value or ())


@dataclass(frozen=True)
class Selection:
    """Which records a leaderboard, chart or report shows: those matching every filter, against one roof.

    Each filter takes one pattern or several (any may match); a string, a list or nothing is accepted
    and kept as a tuple. The CLI builds one from ``--problem --gpu --tag --candidate --roof``.
    """

    problem: tuple[str, ...] = ()
    """Problem names or shell globs (``llama3_1_8b.*``), case-insensitive."""
    gpu: tuple[str, ...] = ()
    """Part of a spec id (``h200`` matches h200_sxm and h200_nvl) or of the device name."""
    tag: tuple[str, ...] = ()
    """Problem tags: keeps the problems carrying any of them."""
    candidate: tuple[str, ...] = ()
    """Candidate names or shell globs, case-insensitive."""
    roof: str | None = None
    """``datasheet`` or ``measured``; None picks datasheet when present, else measured."""

    def __post_init__(self) -> None:
        for name in ("problem", "gpu", "tag", "candidate"):
            object.__setattr__(self, name, _patterns(getattr(self, name)))


def _match_any(values: pd.Series, patterns: Sequence[str]) -> pd.Series:
    """Exact or shell-glob match (``llama3_1_8b.*``) of any pattern, case-insensitive."""
    pats = [p.lower() for p in patterns]
    return values.map(lambda v: isinstance(v, str) and any(fnmatch.fnmatchcase(v.lower(), p) for p in pats))


def _by_name(out: pd.DataFrame, everything: pd.DataFrame, flag: str, column: str,
             pats: tuple[str, ...]) -> pd.DataFrame:
    """Rows whose ``column`` matches a pattern; the error lists what ``everything`` has."""
    if not pats:
        return out
    out = out[_match_any(out[column], pats)]
    if out.empty:
        known = ", ".join(sorted(everything[column].dropna().unique())[:12])
        raise ResultsError(f"{flag} {' '.join(pats)} matches no record (these results have: {known})")
    return out


def _by_gpu(out: pd.DataFrame, everything: pd.DataFrame, pats: tuple[str, ...]) -> pd.DataFrame:
    """Rows whose GPU id, spec id or device name contains a pattern."""
    if not pats:
        return out
    lowered = [g.lower() for g in pats]

    def hit(*names: object) -> bool:
        return any(p in n.lower() for p in lowered for n in names if isinstance(n, str))

    keep = [hit(g, s, d) for g, s, d in zip(out["gpu"], out["gpu_spec"], out["device"], strict=True)]
    if not any(keep):
        known = ", ".join(sorted(everything["gpu"].dropna().unique()))
        raise ResultsError(f"--gpu {' '.join(pats)} matches no record (these results have: {known})")
    return out[keep]


def _by_tag(out: pd.DataFrame, pats: tuple[str, ...]) -> pd.DataFrame:
    """Rows of problems carrying any of the tags."""
    if not pats:
        return out
    wanted = {t.lower() for t in pats}
    tags_of = problem_tags(out)
    out = out[out["problem"].isin({p for p, ts in tags_of.items() if wanted & {t.lower() for t in ts}})]
    if out.empty:
        known = ", ".join(sorted({t for ts in tags_of.values() for t in ts})[:20])
        raise ResultsError(f"--tag {' '.join(pats)} matches no problem (tags here: {known or 'none'})")
    return out


def select(df: pd.DataFrame, selection: Selection | None = None) -> pd.DataFrame:
    """The rows of ``df`` (from :func:`load_results`) that ``selection`` keeps, scored against one roof
    (never both). Raises when none match, naming the filter and what the records have."""
    if not isinstance(df, pd.DataFrame):
        raise ResultsError(f"records: got a {type(df).__name__}; load files once with "
                           "solbench.load_results(paths) and pass the DataFrame")
    sel = Selection() if selection is None else selection
    if not isinstance(sel, Selection):
        raise ResultsError(f"selection: got a {type(sel).__name__}; pass a solbench.Selection(problem=..., gpu=...)")
    if df.empty:
        raise ResultsError("no result records found: pass a results file or folder (e.g. results/) "
                           "written by `solbench run`")
    out = _by_name(df, df, "--problem", "problem", sel.problem)
    out = _by_name(out, df, "--candidate", "solution", sel.candidate)
    out = _by_tag(_by_gpu(out, df, sel.gpu), sel.tag)
    chosen = pick_roof(out, sel.roof)
    return out[out["roof"] == chosen]


def problem_tags(df: pd.DataFrame) -> dict[str, list[str]]:
    """Each problem's tags: from its records, else from the problem file in the problems folder."""
    tags: dict[str, set[str]] = {}
    for name, ts in zip(df["problem"], df["tags"], strict=True):
        tags.setdefault(name, set()).update(ts)
    untagged = [p for p, ts in tags.items() if not ts]
    if untagged:
        tags.update({p: set(t) for p, t in library_tags(tuple(untagged)).items()})
    return {p: sorted(ts) for p, ts in tags.items()}


def geomean(values: Iterable[float | None], floor: float = 1e-6) -> float | None:
    """Geometric mean of the finite values; zero or negative values count as ``floor`` (a zero SOL
    would otherwise make the mean zero and a log of zero undefined); None when nothing is left."""
    x = np.array([v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))], dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return None
    return float(np.exp(np.log(np.maximum(x, floor)).mean()))
