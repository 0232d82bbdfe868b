"""Rank candidates per problem and GPU, and overall, from result records.

Per (problem, GPU): each candidate's best PASSED result per workload; candidates are ranked by
(no failure, workloads passed, geometric-mean SOL over them), so one with a failure (an incorrect
output, an error, a timeout) never ranks above one without; overall by (no failure, whole problems
passed, workloads passed, geometric mean). Both tables count a candidate's workloads against every
workload of the problems it ran (those in the records), so they agree. A candidate caught reward
hacking on a problem is shown with that status and
never ranked on it (nor overall on that GPU). Each GPU is ranked against one roof (datasheet,
measured or estimate): SOLs against different roofs are not comparable. Records left out on the way
(another roof of a GPU, an impossible number, an unreadable line) are named in ``left_out`` and
``warnings``, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from solbench.data import Status
from solbench.present.best_known import with_best_known
from solbench.present.frame import FAILURE_STATUSES, Selection, geomean, select_records
from solbench.present.markup import one_line

SOL_THRESHOLDS = (0.5, 0.8)
HACK = Status.REWARD_HACK.value


@dataclass
class Leaderboard:
    """The rankings of one selection of records, each GPU against one roof."""

    roof: str
    """The roof of every GPU, or the roofs joined by ', ' when GPUs differ (see ``roofs``)."""
    problems: pd.DataFrame
    """One row per (problem, gpu, candidate), ranked within (problem, gpu)."""
    overall: pd.DataFrame
    """One row per (gpu, candidate), ranked within gpu."""
    best: pd.DataFrame
    """The best PASSED record per (problem, gpu, candidate, workload)."""
    records: pd.DataFrame
    """Every record the rankings were computed from (all statuses)."""
    warnings: list[str] = field(default_factory=list)
    """Lines and records skipped while reading (``file:line: reason``)."""
    roofs: dict[str, str] = field(default_factory=dict)
    """GPU -> the roof its SOLs are against."""
    left_out: list[str] = field(default_factory=list)
    """Records the filters matched that are not shown (another roof of a GPU), counted, with the option."""

    @property
    def under_floor(self) -> int:
        """Best results whose T_ideal is below their launch floor (their attainable SOL is shown)."""
        return int(under_floor(self.best).sum())

    def roof_of(self, gpu: str) -> str:
        return self.roofs.get(gpu, self.roof)

    @property
    def roof_phrase(self) -> str:
        """'the datasheet roof', or which roof each GPU is against when they differ."""
        if len(set(self.roofs.values())) <= 1:
            return f"the {one_line(self.roof, 40)} roof"
        pairs = "; ".join(f"{one_line(r, 40)} on {one_line(g, 60)}" for g, r in sorted(self.roofs.items()))
        return f"each GPU's own roof ({pairs})"

    @property
    def notes(self) -> list[str]:
        """Everything a reader should be told: what is not shown, then what could not be read."""
        return [*self.left_out, *self.warnings]

    def to_dict(self) -> dict[str, Any]:
        def rows(df: pd.DataFrame) -> list[dict[str, Any]]:
            return [{k: _plain(v) for k, v in r.items()} for r in df.to_dict(orient="records")]

        return {"roof": self.roof, "roofs": dict(self.roofs), "problems": rows(self.problems),
                "overall": rows(self.overall), "left_out": list(self.left_out), "warnings": list(self.warnings)}


def _plain(v: Any) -> Any:
    """JSON-ready: NaN -> None, numpy scalars -> Python."""
    if isinstance(v, (np.floating, float)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def best_results(records: pd.DataFrame) -> pd.DataFrame:
    """The best (highest SOL) PASSED record per (problem, gpu, candidate, workload)."""
    passed = records[records["status"] == Status.PASSED.value]
    keys = ["problem", "gpu", "solution", "workload"]
    return (passed.sort_values(["sol", "timestamp"], ascending=[False, True], na_position="last")
            .drop_duplicates(keys).sort_values(keys).reset_index(drop=True))


def _failure_counts(records: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    failed = records[records["status"].isin(FAILURE_STATUSES)]
    counts = failed.groupby([*keys, "status"]).size().unstack("status", fill_value=0)
    return counts.reindex(columns=list(FAILURE_STATUSES), fill_value=0)


def _log_sol(best: pd.DataFrame) -> pd.Series:
    # The same guard as analysis.geomean, vectorised: a zero SOL counts as 1e-6, not as log(0).
    return np.log(best["sol"].clip(lower=1e-6))


def _log_attainable(best: pd.DataFrame) -> pd.Series:
    """Log of the attainable SOL (against max(T_ideal, launch floor)); a record without a floor
    counts with its SOL, which is never above its attainable SOL."""
    att = best["attainable_sol"] if "attainable_sol" in best.columns else best["sol"]
    return np.log(att.fillna(best["sol"]).clip(lower=1e-6))


def under_floor(best: pd.DataFrame) -> pd.Series:
    """Results whose T_ideal is below their launch floor: there the attainable SOL differs from SOL."""
    if "t_floor_s" not in best.columns:
        return pd.Series(False, index=best.index)
    return (best["t_floor_s"] > best["t_ideal_s"]) & best["attainable_sol"].notna()


def _assign_ranks(table: pd.DataFrame, group: list[str], order: list[str]) -> pd.DataFrame:
    """Rank within each group by the ``order`` columns, then geomean SOL, all descending; ties share
    a rank. Unrankable rows (disqualified, or nothing passed) get no rank and sort last."""
    table = table.assign(_gm=table["geomean_sol"].fillna(-1.0))
    rankable = ~table["disqualified"] & (table["workloads_passed"] > 0)
    table = table.sort_values([*group, *order, "_gm", "candidate"],
                              ascending=[True] * len(group) + [False] * (len(order) + 1) + [True])
    ranks: list[float] = []
    prev: tuple | None = None
    rank = 0
    seen: dict[tuple, int] = {}
    for ok, row in zip(rankable[table.index], table.to_dict("records"), strict=True):
        if not ok:
            ranks.append(np.nan)
            continue
        g = tuple(row[c] for c in group)
        seen[g] = seen.get(g, 0) + 1
        key = (g, *(row[c] for c in order), row["_gm"])
        if key != prev:  # a tie keeps the rank of the row it ties with
            prev, rank = key, seen[g]
        ranks.append(rank)
    table["rank"] = pd.array(ranks, dtype="Int64")
    table = table.sort_values([*group, "rank", "candidate"], na_position="last", kind="stable")
    return table.drop(columns=["_gm"]).reset_index(drop=True)


def _clean(table: pd.DataFrame) -> pd.Series:
    """Rows without a failure (reward hacks disqualify on their own)."""
    return table[[s for s in FAILURE_STATUSES if s != HACK]].sum(axis=1) == 0


def _note(row: dict) -> str:
    """What the numbers alone do not say (the passed counts already show partial passes)."""
    if row["disqualified"]:
        return f"{HACK}: not ranked"  # the templates key on this prefix
    if row["workloads_passed"] == 0:
        return "nothing passed"
    if row["above_roof"]:
        return f"SOL > 1 on {row['above_roof']}: faster than the roof allows"
    return ""


def rank_problems(records: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    keys = ["problem", "gpu", "solution"]
    cands = records[keys].drop_duplicates()
    totals = records.groupby(["problem", "gpu"])["workload"].nunique().rename("workloads_total")
    b = best.assign(_log=_log_sol(best), _alog=_log_attainable(best), _above=best["sol"] > 1.0)
    agg = b.groupby(keys).agg(workloads_passed=("workload", "nunique"), _log=("_log", "mean"), _alog=("_alog", "mean"),
                              min_sol=("sol", "min"), max_sol=("sol", "max"), above_roof=("_above", "sum"))
    agg["geomean_sol"] = np.exp(agg.pop("_log"))
    agg["geomean_attainable_sol"] = np.exp(agg.pop("_alog"))
    table = (cands.merge(totals, on=["problem", "gpu"]).merge(agg, on=keys, how="left")
             .merge(_failure_counts(records, keys), on=keys, how="left"))
    table[[*FAILURE_STATUSES, "workloads_passed", "above_roof"]] = (
        table[[*FAILURE_STATUSES, "workloads_passed", "above_roof"]].fillna(0).astype(int))
    table["disqualified"] = table[HACK] > 0
    table["complete"] = (table["workloads_passed"] == table["workloads_total"]) & ~table["disqualified"]
    table = table.rename(columns={"solution": "candidate"})
    table["_clean"] = _clean(table)
    table = _assign_ranks(table, ["problem", "gpu"], ["_clean", "workloads_passed"]).drop(columns=["_clean"])
    table["note"] = [_note(r) for r in table.to_dict("records")]
    cols = ["problem", "gpu", "rank", "candidate", "workloads_passed", "workloads_total", "geomean_sol",
            "geomean_attainable_sol", "min_sol", "max_sol", "complete", "disqualified", "above_roof", *FAILURE_STATUSES, "note"]
    return table[cols]


def rank_overall(records: pd.DataFrame, best: pd.DataFrame, per_problem: pd.DataFrame) -> pd.DataFrame:
    keys = ["gpu", "solution"]
    cands = records[keys].drop_duplicates()
    # the workloads of the problems it ran, as the per-problem table counts them
    ran = per_problem.rename(columns={"candidate": "solution"})
    attempted = ran.groupby(keys).agg(problems_attempted=("problem", "nunique"),
                                      workloads_attempted=("workloads_total", "sum"))
    b = best.assign(_log=_log_sol(best), _alog=_log_attainable(best), _ge5=best["sol"] >= SOL_THRESHOLDS[0],
                    _ge8=best["sol"] >= SOL_THRESHOLDS[1], _above=best["sol"] > 1.0)
    agg = b.groupby(keys).agg(workloads_passed=("sol", "size"), _log=("_log", "mean"), _alog=("_alog", "mean"),
                              _ge5=("_ge5", "sum"), _ge8=("_ge8", "sum"), above_roof=("_above", "sum"))
    agg["geomean_sol"] = np.exp(agg.pop("_log"))
    agg["geomean_attainable_sol"] = np.exp(agg.pop("_alog"))
    solved = (per_problem[per_problem["complete"]].groupby(["gpu", "candidate"]).size()
              .rename("problems_passed").rename_axis(keys))
    table = (cands.merge(attempted, on=keys).merge(agg, on=keys, how="left").merge(solved, on=keys, how="left")
             .merge(_failure_counts(records, keys), on=keys, how="left"))
    ints = [*FAILURE_STATUSES, "workloads_passed", "problems_passed", "above_roof", "_ge5", "_ge8"]
    table[ints] = table[ints].fillna(0).astype(int)
    table["share_sol_ge_0_5"] = table.pop("_ge5") / table["workloads_attempted"]
    table["share_sol_ge_0_8"] = table.pop("_ge8") / table["workloads_attempted"]
    table["disqualified"] = table[HACK] > 0
    table = table.rename(columns={"solution": "candidate"})
    # No failure, whole problems passed, then workloads passed: a candidate with a failure never
    # outranks one without, nor one that fails more one that fails less, whatever its SOL.
    table["_clean"] = _clean(table)
    table = _assign_ranks(table, ["gpu"], ["_clean", "problems_passed", "workloads_passed"]).drop(columns=["_clean"])
    table["note"] = [_note(r) for r in table.to_dict("records")]
    cols = ["gpu", "rank", "candidate", "problems_passed", "problems_attempted", "workloads_passed",
            "workloads_attempted", "geomean_sol", "geomean_attainable_sol", "share_sol_ge_0_5", "share_sol_ge_0_8", "disqualified",
            "above_roof", *FAILURE_STATUSES, "note"]
    return table[cols]


def leaderboard(results: pd.DataFrame, selection: Selection | None = None) -> Leaderboard:
    """Rankings per problem and GPU, and overall per GPU, of the records (a DataFrame from
    :func:`solbench.load_results`) that ``selection`` keeps (all of them, against one roof, by default)."""
    records, left_out = select_records(results, selection)
    best = best_results(records)
    per_problem = with_best_known(rank_problems(records, best), best, records)
    overall = rank_overall(records, best, per_problem)
    roofs = {str(g): str(r) for g, r in records[["gpu", "roof"]].drop_duplicates().itertuples(index=False)}
    return Leaderboard(roof=", ".join(sorted(set(roofs.values()))), problems=per_problem, overall=overall, best=best,
                       records=records, warnings=list(results.attrs.get("warnings", [])), roofs=roofs,
                       left_out=left_out)


__all__ = ["Leaderboard", "best_results", "geomean", "leaderboard", "rank_overall", "rank_problems"]
