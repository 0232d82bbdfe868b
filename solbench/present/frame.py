"""Result records as a pandas DataFrame, and the one Selection the leaderboard, plots and report share.

``load_results`` reads JSONL files or folders tolerantly (a line that is not a valid record is a
warning, never a crash: see :func:`solbench.data.results.read_records`), flattens nested fields with
dotted names (``timing.method``, ``environment.driver``), and fills in what older records lack from
what they do carry (intensity from FLOPs and bytes, achieved rates from the time).

Records are untrusted input, and a record whose numbers are impossible is left out with a warning
(``file:line: sol 1e+308 is impossible (...), record left out``) rather than ranked, charted or
printed: a number that is infinite, negative, above ``MAX_MAGNITUDE`` (no FLOP count, byte count,
time or rate comes near), or a SOL above ``MAX_SOL`` (the engine's physics floor rejects any time
below the roof's, so no record it writes has one). A SOL between 1 and ``MAX_SOL`` is ranked and
flagged "faster than the roof allows". A missing number (null, NaN) stays missing; a PASSED record
without a positive time and SOL is left out with a warning too.

A ranking compares SOLs against one roof: each GPU is shown against one roof (the one asked for, else
datasheet when it has datasheet records, else measured, else its only one, e.g. a CPU's
``estimate``), so every GPU gets its own tables; the records of a GPU against another roof are not
shown, and :func:`select_records` returns one line per such group, with the option that shows them.
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

from solbench.data import (
    NOISY_CI95_REL,
    NOISY_FLAG,
    NOISY_P90_RATIO,
    Status,
    is_spec_id,
    library_tags,
    noisy_reason,
    read_records,
)
from solbench.errors import SolbenchError, SpecError
from solbench.present.markup import one_line

CONTRACT_COLUMNS = ("problem", "workload", "solution", "status", "device", "gpu_spec", "time_s", "sol",
                    "flops", "bytes", "t_ideal_s", "bound", "timestamp", "solbench_version")
NUMERIC_COLUMNS = ("time_s", "sol", "flops", "bytes", "t_ideal_s", "t_compute_s", "t_memory_s",
                   "arithmetic_intensity", "achieved_flops_per_s", "achieved_bytes_per_s", "t_floor_s")
TEXT_COLUMNS = ("problem", "workload", "solution", "status", "device", "gpu_spec", "bound", "timestamp",
                "solbench_version", "roof", "compute_dtype", "reason", "log")
FAILURE_STATUSES = tuple(s.value for s in Status if s is not Status.PASSED)
# A failure's short label where space is tight (leaderboard cells, chart marks); the legend says what each means.
STATUS_SHORT = {"INCORRECT": "INC", "RUNTIME_ERROR": "ERR", "COMPILE_ERROR": "CE", "TIMEOUT": "T/O",
                "REWARD_HACK": "HACK"}
# Identity of one measurement: the same line read twice (a file and its folder both given) is one record.
_IDENTITY = ("problem", "workload", "solution", "status", "gpu_spec", "roof", "timestamp", "time_s", "run_id")
ROOFS = ("datasheet", "measured", "estimate")  # what records carry; the order is the default's preference
FLATTEN_LEVELS = 2  # telemetry.sm_clock_mhz.min is a column; deeper dicts (per-kernel tables) stay one cell
MAX_SOL = 10.0
MAX_MAGNITUDE = 1e30


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
    df = pd.DataFrame([_flatten(r) for r in records]) if records else pd.DataFrame()
    df = df.drop(columns=["source"], errors="ignore").rename(columns={"_source": "source"})
    for col in (*CONTRACT_COLUMNS, *NUMERIC_COLUMNS, *TEXT_COLUMNS, "source", "run_id", "tags", "flags"):
        if col not in df.columns:
            df[col] = None
    df["source"] = df["source"].map(lambda v: one_line(v, 300) if v is not None else "record")
    infinite = {col: _numbers(df, col) for col in NUMERIC_COLUMNS}
    for col in TEXT_COLUMNS:
        df[col] = df[col].map(_text).astype(object)
    df["status"] = df["status"].map(lambda s: s.upper() if isinstance(s, str) else s)
    df["roof"] = df["roof"].fillna("datasheet")
    df["tags"] = df["tags"].map(_string_list)
    df["flags"] = df["flags"].map(_string_list)
    df["gpu"] = [_gpu_id(spec, device) for spec, device in zip(df["gpu_spec"], df["device"], strict=True)]
    _measured_join_their_device(df)
    _fill_derived(df)
    df = _usable(df, infinite, found)
    subset = [c for c in _IDENTITY if c in df.columns]
    df = df.drop_duplicates(subset=subset).reset_index(drop=True)
    df.attrs["warnings"] = found
    return df


def _flatten(record: dict, prefix: str = "", level: int = 0, out: dict | None = None) -> dict:
    """Nested dicts as dotted keys, FLATTEN_LEVELS deep (as pandas.json_normalize does, without its
    deep copy of every record); an empty dict leaves no key."""
    out = {} if out is None else out
    for k, v in record.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and level < FLATTEN_LEVELS:
            _flatten(v, key + ".", level + 1, out)
        else:
            out[key] = v
    return out


def _numbers(df: pd.DataFrame, col: str) -> pd.Series:
    """Make ``col`` float64 (what is not a number becomes NaN); returns where it was infinite."""
    try:
        values = pd.to_numeric(df[col], errors="coerce")
    except (OverflowError, TypeError, ValueError):  # an integer beyond a double (a dict not from read_records)
        values = df[col].map(_float)
    values = values.astype("float64")
    infinite = np.isinf(values)
    df[col] = values.where(np.isfinite(values))
    return infinite


def _float(v: object) -> float:
    try:
        return float(v)  # type: ignore[arg-type]
    except (OverflowError, TypeError, ValueError):
        return math.inf if isinstance(v, int) else math.nan


def _usable(df: pd.DataFrame, infinite: dict[str, pd.Series], found: list[str]) -> pd.DataFrame:
    """The records fit to rank; each one left out adds a warning that names its file, line and why."""
    unknown = ~df["status"].isin([s.value for s in Status])
    for src, st in zip(df.loc[unknown, "source"], df.loc[unknown, "status"], strict=True):
        found.append(f"{src}: unknown status {one_line(st, 40)!r}, record skipped")
    why = _impossible(df, infinite).where(~unknown, "")
    for src, reason in zip(df.loc[why != "", "source"], why[why != ""], strict=True):
        found.append(f"{src}: {reason}, record left out")
    bad = unknown | (why != "")
    unusable = ~bad & (df["status"] == Status.PASSED.value) & ~((df["time_s"] > 0) & (df["sol"] > 0))
    for src in df.loc[unusable, "source"]:
        found.append(f"{src}: PASSED without a positive time_s and sol, record skipped")
    missing = ~bad & ~unusable & (df["problem"].isna() | df["workload"].isna() | df["solution"].isna())
    for src in df.loc[missing, "source"]:
        found.append(f"{src}: no problem/workload/solution, record skipped")
    return df[~(bad | unusable | missing)]


def _impossible(df: pd.DataFrame, infinite: dict[str, pd.Series]) -> pd.Series:
    """Per row, why its first impossible number is impossible ("" when none is)."""
    why = pd.Series("", index=df.index, dtype=object)
    for col in NUMERIC_COLUMNS:
        limit = MAX_SOL if col == "sol" else MAX_MAGNITUDE
        hit = (infinite[col] | (df[col] < 0) | (df[col] > limit)) & (why == "")
        if hit.any():
            why[hit] = [_impossible_text(col, x, limit, inf)
                        for x, inf in zip(df.loc[hit, col], infinite[col][hit], strict=True)]
    return why


def _impossible_text(col: str, x: float, limit: float, infinite: bool) -> str:
    if infinite:
        return f"{col} is infinite"
    if x < 0:
        return f"{col} {x:.3g} is impossible (negative)"
    if col == "sol":
        return (f"sol {x:.3g} is impossible (above {limit:g}: no kernel runs {limit:g} times faster than its roof, "
                "and the physics floor rejects any time below the roof's)")
    return f"{col} {x:.3g} is impossible (above {limit:g})"


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
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ai = df["flops"] / df["bytes"].where(df["bytes"] > 0)
        df["arithmetic_intensity"] = df["arithmetic_intensity"].fillna(ai)
        passed = df["status"] == Status.PASSED.value
        df["achieved_flops_per_s"] = df["achieved_flops_per_s"].fillna((df["flops"] / df["time_s"]).where(passed))
        df["achieved_bytes_per_s"] = df["achieved_bytes_per_s"].fillna((df["bytes"] / df["time_s"]).where(passed))
        # Attainable SOL: against max(T_ideal, launch floor), where the record carries its floor (one
        # above MAX_SOL x the time is not a floor the timer read: no attainable SOL then).
        floor = df["t_floor_s"].where(df["t_floor_s"] <= MAX_SOL * df["time_s"])
        df["attainable_sol"] = (np.maximum(df["t_ideal_s"], floor) / df["time_s"]).where(passed & floor.notna())
    df["timestamp_utc"] = _timestamps(df["timestamp"])
    df["noisy"] = _noisy_reasons(df)


# Dates every formatter (strftime, local time) can show: a record may say 0001-01-01T00:00:00+14:00,
# which is in year 0 in UTC; outside these it counts as no date at all.
_FIRST_DATE, _LAST_DATE = pd.Timestamp("1970-01-01", tz="UTC"), pd.Timestamp("9999-12-01", tz="UTC")


def _timestamps(text: pd.Series) -> pd.Series:
    """The records' timestamps in UTC; NaT where unreadable or outside the dates shown."""
    ts = pd.to_datetime(text, errors="coerce", utc=True, format="ISO8601")
    return ts.where((ts >= _FIRST_DATE) & (ts <= _LAST_DATE))


NOISY_WHEN_FLAGGED = "noisy timing (flagged when measured)"


def _noisy_reasons(df: pd.DataFrame) -> pd.Series:
    """Why a PASSED record's time is too noisy to rank on ('' when it is not): from its timing
    statistics (older records lack the flag), else from the ``noisy_timing`` flag it carries."""
    out = pd.Series("", index=df.index, dtype=object)
    passed = df["status"] == Status.PASSED.value
    stats = {k: df[f"timing.{k}"] if f"timing.{k}" in df.columns else pd.Series(np.nan, index=df.index)
             for k in ("ci95_rel", "median_s", "p90_s")}
    with warnings.catch_warnings():  # a column of text where numbers belong reads as no number
        warnings.simplefilter("ignore")
        ci, med, p90 = (pd.to_numeric(v, errors="coerce") for v in stats.values())
    maybe = passed & ((ci > NOISY_CI95_REL) | (p90 > NOISY_P90_RATIO * med))
    for i in df.index[maybe]:
        out[i] = noisy_reason({"ci95_rel": ci[i], "median_s": med[i], "p90_s": p90[i]}) or ""
    flagged = passed & (out == "") & df["flags"].map(lambda fs: NOISY_FLAG in fs)
    out[flagged] = NOISY_WHEN_FLAGGED
    return out


@lru_cache(maxsize=256)
def _base_spec_id(spec_id: str, spec_path_env: str | None) -> str:
    """A measured spec's datasheet id (``based_on``), so datasheet and measured records share a GPU.

    ``spec_path_env`` ($SOLBENCH_SPECS) is part of the cache key: it changes where specs are found.
    """
    from solbench.data import load_spec_id

    try:
        spec = load_spec_id(spec_id)
    except (SpecError, OSError):
        return spec_id
    return spec.based_on if spec.kind == "measured" and spec.based_on else spec_id


def _gpu_id(gpu_spec: object, device: object) -> str:
    if isinstance(gpu_spec, str) and gpu_spec:
        if is_spec_id(gpu_spec):  # a record's text is never a path to open
            return _base_spec_id(gpu_spec, os.environ.get("SOLBENCH_SPECS"))
        return gpu_spec
    return str(device) if isinstance(device, str) and device else "unknown"


def _measured_join_their_device(df: pd.DataFrame) -> None:
    """Measured records whose spec file is not here (so no ``based_on`` to follow) share the GPU of the
    datasheet records from the same device, when those name one GPU: one device, one set of tables."""
    unresolved = (df["roof"] == "measured") & (df["gpu"] == df["gpu_spec"])
    if not unresolved.any():
        return
    datasheet = df[df["roof"] == "datasheet"].groupby("device")["gpu"].unique()
    gpu_of = {d: g[0] for d, g in datasheet.items() if len(g) == 1}
    df.loc[unresolved, "gpu"] = [gpu_of.get(d, g) for d, g in zip(df.loc[unresolved, "device"],
                                                                  df.loc[unresolved, "gpu"], strict=True)]


def _known(values: Iterable[object], limit: int = 12) -> str:
    """What the records have, for an error message: sorted, cleaned, at most ``limit`` of them."""
    names = sorted({v for v in values if isinstance(v, str)})
    shown = ", ".join(one_line(v, 60) for v in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _preferred_roof(present: Iterable[str]) -> str:
    """Datasheet when present, else measured, else estimate, else the first by name."""
    have = set(present)
    return next((r for r in ROOFS if r in have), min(have, default="datasheet"))


def pick_roof(df: pd.DataFrame, roof: str | None) -> str:
    """The roof of ``df`` to score against: the one asked for (an error when no record has it), else
    datasheet when present, else measured, else whatever roof the records have (a CPU's estimate)."""
    present = set(df["roof"].dropna().unique())
    if roof is not None:
        if roof not in present:
            raise ResultsError(f"--roof {one_line(roof, 60)}: no records scored against that roof (these have: "
                               f"{_known(present) or 'none'}); pass --roof {one_line(_preferred_roof(present), 60)}")
        return roof
    return _preferred_roof(present)


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
    """``datasheet``, ``measured`` or ``estimate`` (a CPU without a measured spec). None: each GPU
    against its own, datasheet when it has datasheet records, else measured, else estimate."""

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
        raise ResultsError(f"{flag} {' '.join(pats)} matches no record (these results have: "
                           f"{_known(everything[column])})")
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
        raise ResultsError(f"--gpu {' '.join(pats)} matches no record (these results have: "
                           f"{_known(everything['gpu'])})")
    return out[keep]


def _by_tag(out: pd.DataFrame, pats: tuple[str, ...]) -> pd.DataFrame:
    """Rows of problems carrying any of the tags."""
    if not pats:
        return out
    wanted = {t.lower() for t in pats}
    tags_of = problem_tags(out)
    out = out[out["problem"].isin({p for p, ts in tags_of.items() if wanted & {t.lower() for t in ts}})]
    if out.empty:
        known = _known((t for ts in tags_of.values() for t in ts), 20)
        raise ResultsError(f"--tag {' '.join(pats)} matches no problem (tags here: {known or 'none'})")
    return out


def select(df: pd.DataFrame, selection: Selection | None = None) -> pd.DataFrame:
    """The rows of ``df`` (from :func:`load_results`) that ``selection`` keeps, each GPU against one roof
    (never two). Raises when none match, naming the filter and what the records have. What matched
    but is not shown (another roof of a GPU) is told by :func:`select_records`."""
    return select_records(df, selection)[0]


def select_records(df: pd.DataFrame, selection: Selection | None = None) -> tuple[pd.DataFrame, list[str]]:
    """:func:`select`, and one line per (GPU, roof) whose records match the filters but are not shown,
    with their count and the option that shows them."""
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
    pick_roof(out, sel.roof)  # a roof no matching record has is an error
    return _one_roof_per_gpu(out, sel.roof)


def _one_roof_per_gpu(out: pd.DataFrame, roof: str | None) -> tuple[pd.DataFrame, list[str]]:
    """Each GPU's records against ``roof`` (None: its preferred one), and what that leaves out."""
    counts = out.groupby(["gpu", "roof"], sort=True).size()
    roofs_of: dict[str, list[str]] = {}
    for gpu, r in counts.index:
        roofs_of.setdefault(gpu, []).append(r)
    chosen = {gpu: roof if roof is not None else _preferred_roof(rs) for gpu, rs in roofs_of.items()}
    notes = []
    for (gpu, r), n in counts.items():
        if r != chosen[gpu]:
            notes.append(f"{one_line(gpu, 60)}: {n} record(s) against the {one_line(r, 40)} roof not shown "
                         f"(one roof per GPU): pass --roof {one_line(r, 40)} to see them")
    return out[out["roof"] == out["gpu"].map(chosen)], notes


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
