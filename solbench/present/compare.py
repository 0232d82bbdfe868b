"""`solbench compare`: pair the records of BASE and NEW and test each pair's time ratio.

Two ways to pair (``by``):

* ``file``: BASE and NEW are two sets of records (before and after a change); a pair is one
  (problem, workload, GPU, candidate) present in both.
* ``candidate``: BASE and NEW are two candidate names in one set of records (e.g. an
  ``--interleave`` run of both); a pair is one (problem, workload, GPU) both ran.

Per pair, :func:`solbench.present.significance.compare_samples` on the PASSED records' timing
samples (each record is one round); per GPU (and candidate, by file) the geometric mean of the
ratios with its interval. Pairs that cannot be compared (on one side only, not PASSED on a side,
no timing samples) are listed in ``missing`` with the reason, never dropped silently.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from solbench.errors import SolbenchError
from solbench.present.markup import markdown_cell, one_line
from solbench.present.significance import (
    DEFAULT_ALPHA,
    DEFAULT_BOOTSTRAP,
    DEFAULT_MIN_EFFECT,
    Comparison,
    clean_samples,
    compare_samples,
    geomean_interval,
)

By = Literal["file", "candidate"]
SAMPLES = "timing.samples_s"
ROUND_KEYS = ("run_id", "timing.interleave.round")


class CompareError(SolbenchError):
    """The comparison cannot be made as asked (no such candidate, nothing to pair)."""


@dataclass
class CompareRow:
    problem: str
    workload: str
    gpu: str
    candidate: str
    base_candidate: str
    base_time_s: float
    new_time_s: float
    comparison: Comparison

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {"problem": self.problem, "workload": self.workload, "gpu": self.gpu, "candidate": self.candidate,
                "base_candidate": self.base_candidate, "ratio": c.ratio, "ci_low": c.ci_low, "ci_high": c.ci_high,
                "p_value": c.p_value, "verdict": c.verdict, "method": c.method, "base_time_s": self.base_time_s,
                "new_time_s": self.new_time_s, "n_base": c.n_base, "n_new": c.n_new,
                "rounds_base": c.rounds_base, "rounds_new": c.rounds_new}


@dataclass
class CompareResult:
    """Every pair's comparison, the geometric means, and what could not be compared."""

    by: str
    base: str
    new: str
    min_effect: float
    alpha: float
    rows: list[CompareRow] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def slower_than(self, pct: float) -> list[CompareRow]:
        """Pairs significantly slower (p < alpha) by more than ``pct`` percent."""
        return [r for r in self.rows
                if r.comparison.p_value < self.alpha and r.comparison.ratio > 1.0 + pct / 100.0]

    def to_dict(self) -> dict[str, Any]:
        return {"by": self.by, "base": self.base, "new": self.new, "min_effect": self.min_effect, "alpha": self.alpha,
                "rows": [r.as_dict() for r in self.rows], "summary": self.summary, "missing": self.missing,
                "warnings": self.warnings}


def _filtered(df: pd.DataFrame, problems: Sequence[str], gpus: Sequence[str]) -> pd.DataFrame:
    if problems:
        pats = [p.lower() for p in problems]
        df = df[df["problem"].map(lambda v: isinstance(v, str) and any(fnmatch.fnmatchcase(v.lower(), p)
                                                                      for p in pats))]
    if gpus:
        pats = [g.lower() for g in gpus]
        df = df[[any(p in str(x).lower() for p in pats for x in (g, s, d))
                 for g, s, d in zip(df["gpu"], df["gpu_spec"], df["device"], strict=True)]]
    return df


def _rounds(group: pd.DataFrame) -> list[tuple[Any, list[float]]]:
    """(round key, samples) per PASSED record with samples, in time order."""
    passed = group[group["status"] == "PASSED"].sort_values("timestamp", na_position="first")
    col = passed[SAMPLES] if SAMPLES in passed.columns else pd.Series([None] * len(passed), index=passed.index)
    keys = [tuple(r.get(k) for k in ROUND_KEYS) for r in passed.reindex(columns=list(ROUND_KEYS)).to_dict("records")]
    return [(k, list(clean_samples(s))) for k, s in zip(keys, col, strict=True) if clean_samples(s).size]


def _paired(base: list[tuple[Any, list[float]]], new: list[tuple[Any, list[float]]]) -> bool:
    """Rounds of one interleaved run: the same (run id, round) on both sides, each once."""
    kb, kn = [k for k, _ in base], [k for k, _ in new]
    ok = all(k[0] is not None and isinstance(k[1], (int, float)) and k[1] == k[1] for k in kb)
    return ok and len(set(kb)) == len(kb) and sorted(kb, key=str) == sorted(kn, key=str)


def _why_missing(base: pd.DataFrame | None, new: pd.DataFrame | None) -> str | None:
    """Why a pair cannot be compared, or None when both sides have PASSED records with samples."""
    for side, g in (("BASE", base), ("NEW", new)):
        if g is None or g.empty:
            return f"no record in {side}"
        if not (g["status"] == "PASSED").any():
            statuses = ", ".join(sorted(set(map(str, g["status"]))))
            return f"not PASSED in {side} ({one_line(statuses, 80)})"
        if not _rounds(g):
            return f"no timing samples in {side}"
    return None


def _align(rows: list[tuple[Any, list[float]]], order: list[Any]) -> list[list[float]]:
    by_key = dict(rows)
    return [by_key[k] for k in order]


def _compare_group(key: dict[str, str], base: pd.DataFrame, new: pd.DataFrame, options: dict) -> CompareRow:
    rb, rn = _rounds(base), _rounds(new)
    paired = _paired(rb, rn)
    if paired:
        order = sorted((k for k, _ in rb), key=str)
        sb, sn = _align(rb, order), _align(rn, order)
    else:
        sb, sn = [s for _, s in rb], [s for _, s in rn]
    c = compare_samples(sb, sn, paired=paired, **options)
    med = lambda side: float(pd.Series([x for s in side for x in s]).median())  # noqa: E731 - two uses
    return CompareRow(key["problem"], key["workload"], key["gpu"], key["candidate"], key["base_candidate"],
                      med(sb), med(sn), c)


def _groups(df: pd.DataFrame, keys: list[str]) -> dict[tuple, pd.DataFrame]:
    return {k if isinstance(k, tuple) else (k,): g for k, g in df.groupby(keys, sort=True)} if not df.empty else {}


def _sides(base: pd.DataFrame, new: pd.DataFrame, by: By, base_name: str,
           new_name: str) -> tuple[dict, dict, list[str]]:
    """Each side's record groups by pair key, and the key's columns."""
    if by == "candidate":
        for name in (base_name, new_name):
            if not (base["solution"] == name).any():
                known = ", ".join(sorted({one_line(s, 60) for s in base["solution"].dropna()})[:20])
                raise CompareError(f"candidate {one_line(name, 60)!r} has no record here (these results have: "
                                   f"{known}); pass two candidate names with --by candidate")
        keys = ["problem", "workload", "gpu"]
        return _groups(base[base["solution"] == base_name], keys), _groups(new[new["solution"] == new_name], keys), keys
    keys = ["problem", "workload", "gpu", "solution"]
    return _groups(base, keys), _groups(new, keys), keys


def _refuse_other_gpus(result: CompareResult, base: pd.DataFrame, new: pd.DataFrame) -> None:
    """Nothing compared because the two sides were scored on different GPUs or roofs (two calibrations of
    a CPU have different ids): one clear error instead of an empty table."""
    gpus = [sorted({one_line(g, 60) for g in side["gpu"].dropna()}) for side in (base, new)]
    if result.rows or not gpus[0] or not gpus[1] or set(gpus[0]) & set(gpus[1]):
        return
    raise CompareError(f"{result.base} was measured on {', '.join(gpus[0][:3])} and {result.new} on "
                       f"{', '.join(gpus[1][:3])}: no pair shares a GPU and roof, and times of different machines or "
                       "roofs are not compared; compare runs scored against one spec (--gpu ID on both runs)")


def compare_frames(base: pd.DataFrame, new: pd.DataFrame, *, by: By = "file", base_name: str = "BASE",
                   new_name: str = "NEW", min_effect: float = DEFAULT_MIN_EFFECT, alpha: float = DEFAULT_ALPHA,
                   n_boot: int = DEFAULT_BOOTSTRAP, problems: Sequence[str] = (), gpus: Sequence[str] = ()
                   ) -> CompareResult:
    """Compare the records of ``new`` with those of ``base`` (DataFrames from :func:`load_results`).

    ``by="candidate"``: ``base`` and ``new`` are the same records, ``base_name`` and ``new_name``
    two candidates in them. ``problems`` (globs) and ``gpus`` (parts of a spec id or device name)
    narrow both sides."""
    if by not in ("file", "candidate"):
        raise CompareError(f"--by {one_line(by, 40)!r}: pick file or candidate")
    if not 0 <= min_effect < 1 or not 0 < alpha < 1 or n_boot < 100:
        raise CompareError("--min-effect must be in [0, 1), --alpha in (0, 1) and --bootstrap at least 100")
    base, new = _filtered(base, problems, gpus), _filtered(new, problems, gpus)
    gb, gn, keys = _sides(base, new, by, base_name, new_name)
    result = CompareResult(by, base_name, new_name, min_effect, alpha)
    options = {"min_effect": min_effect, "alpha": alpha, "n_boot": n_boot}
    for k in sorted(set(gb) | set(gn), key=lambda t: tuple(map(str, t))):
        key = dict(zip(keys, k, strict=True))
        key = {"problem": key["problem"], "workload": key["workload"], "gpu": key["gpu"],
               "candidate": key.get("solution", new_name), "base_candidate": key.get("solution", base_name)}
        why = _why_missing(gb.get(k), gn.get(k))
        if why:
            result.missing.append({**key, "reason": why})
            continue
        result.rows.append(_compare_group(key, gb[k], gn[k], options))
    if not result.rows and not result.missing:
        raise CompareError("nothing to compare: no records on either side match (check the paths and filters)")
    _refuse_other_gpus(result, base, new)
    result.summary = summarize(result.rows, alpha)
    return result


def summarize(rows: list[CompareRow], alpha: float) -> list[dict[str, Any]]:
    """Per GPU and candidate: pairs, the geometric-mean ratio with its interval, verdict counts."""
    groups: dict[tuple[str, str], list[CompareRow]] = {}
    for r in rows:
        groups.setdefault((r.gpu, r.candidate), []).append(r)
    out = []
    for (gpu, cand), rs in sorted(groups.items()):
        gm = geomean_interval([r.comparison for r in rs], alpha)
        counts = {v: sum(r.comparison.verdict == v for r in rs) for v in ("faster", "slower", "same")}
        out.append({"gpu": gpu, "candidate": cand, "pairs": len(rs), "geomean_ratio": gm[0] if gm else None,
                    "ci_low": gm[1] if gm else None, "ci_high": gm[2] if gm else None, **counts})
    return out


# ---------------------------------------------------------------------------------------------
# Output

HEADERS = ("problem", "workload", "GPU", "candidate", "BASE", "NEW", "ratio", "95% CI", "p", "verdict")


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def row_cells(r: CompareRow) -> list[str]:
    """One row as display strings (terminal, markdown and the HTML report read the same)."""
    from solbench.units import si

    c = r.comparison
    cand = r.candidate if r.candidate == r.base_candidate else f"{r.base_candidate} → {r.candidate}"
    return [one_line(r.problem, 80), one_line(r.workload, 60), one_line(r.gpu, 40), one_line(cand, 80),
            si(r.base_time_s, "s"), si(r.new_time_s, "s"), f"{c.ratio:.3f}", f"{c.ci_low:.3f}–{c.ci_high:.3f}",
            f"{c.p_value:.2g}", c.verdict]


def summary_line(s: dict[str, Any]) -> str:
    gm = "-" if s["geomean_ratio"] is None else (f"{s['geomean_ratio']:.3f} ({_pct(s['geomean_ratio'])}), 95% "
                                                  f"{s['ci_low']:.3f} – {s['ci_high']:.3f}")
    return (f"{one_line(s['candidate'], 80)} on {one_line(s['gpu'], 40)}: geomean NEW/BASE {gm} over {s['pairs']} "
            f"pair(s): {s['slower']} slower, {s['faster']} faster, {s['same']} same")


def missing_line(m: dict[str, Any]) -> str:
    return (f"{one_line(m['problem'], 80)} / {one_line(m['workload'], 60)} / {one_line(m['candidate'], 60)} on "
            f"{one_line(m['gpu'], 40)}: {m['reason']}")


def to_markdown(result: CompareResult) -> str:
    parts = [f"# {markdown_cell(result.new)} against {markdown_cell(result.base)}", "",
             f"Ratio = NEW time / BASE time (above 1: slower). Verdict: p < {result.alpha:g} and at least "
             f"{result.min_effect * 100:g}% away from 1.", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "|".join(" --- " for _ in HEADERS) + "|"]
    parts += ["| " + " | ".join(markdown_cell(c) for c in row_cells(r)) + " |" for r in result.rows]
    parts += ["", "## Geometric mean", ""] + [f"- {markdown_cell(summary_line(s))}" for s in result.summary]
    if result.missing:
        parts += ["", "## Not compared", ""] + [f"- {markdown_cell(missing_line(m))}" for m in result.missing]
    return "\n".join(parts) + "\n"


def to_json(result: CompareResult) -> str:
    return json.dumps(result.to_dict(), indent=2)
