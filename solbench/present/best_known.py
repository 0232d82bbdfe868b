"""The 'best known' reference points: per problem, GPU and workload, the best PASSED SOL of a library baseline.

A baseline is a candidate whose record names its library (``baseline: {library, version}``, from the
file's ``BASELINE = "..."``); records made before that field existed are recognised by their name
(``lib_*``, ``liger_*``). Each candidate's gap is its SOL over the best baseline's, per workload,
as a geometric mean over the workloads where both passed: 1.0 = as good as the best library,
0.5 = half its speed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BASELINE_PREFIXES = ("lib_", "liger_")  # older records have no ``baseline`` field


def is_baseline(records: pd.DataFrame) -> pd.Series:
    """Which rows are library baselines."""
    named = records["solution"].astype(str).map(lambda s: s.rsplit("/", 1)[-1].startswith(BASELINE_PREFIXES))
    if "baseline.library" in records.columns:
        return records["baseline.library"].notna() | named
    return named


def baseline_labels(records: pd.DataFrame) -> dict[str, str]:
    """candidate -> 'library version' for the baselines among ``records`` (the newest version seen)."""
    rows = records[is_baseline(records)]
    labels = {}
    for r in rows.sort_values("timestamp").to_dict("records"):
        library = r.get("baseline.library")
        version = r.get("baseline.version")
        if isinstance(library, str):
            labels[r["solution"]] = f"{library} {version}" if isinstance(version, str) else library
        else:
            labels.setdefault(r["solution"], "library")
    return labels


def best_known(best: pd.DataFrame) -> pd.DataFrame:
    """Per (problem, gpu, workload): ``best_known_sol`` and the baseline that reached it (``best_known_by``),
    from the best PASSED results (:func:`solbench.present.ranking.best_results`)."""
    cols = ["problem", "gpu", "workload", "best_known_sol", "best_known_by"]
    base = best[is_baseline(best) & best["sol"].notna()]
    if base.empty:
        return pd.DataFrame(columns=cols)
    top = base.sort_values("sol", ascending=False).drop_duplicates(["problem", "gpu", "workload"])
    return top.rename(columns={"sol": "best_known_sol", "solution": "best_known_by"})[cols].reset_index(drop=True)


def gaps(best: pd.DataFrame, known: pd.DataFrame) -> pd.DataFrame:
    """Per (problem, gpu, candidate): ``best_known_sol`` (geomean over the workloads that have one) and
    ``gap_to_best_known`` (geomean of SOL / best-known SOL over the workloads where both exist)."""
    keys = ["problem", "gpu", "solution"]
    cols = ["problem", "gpu", "candidate", "best_known_sol", "gap_to_best_known"]
    if known.empty:
        return pd.DataFrame(columns=cols)
    joined = best.merge(known, on=["problem", "gpu", "workload"], how="inner")
    joined = joined[(joined["sol"] > 0) & (joined["best_known_sol"] > 0)]
    joined = joined.assign(_log_known=np.log(joined["best_known_sol"]),
                           _log_gap=np.log(joined["sol"] / joined["best_known_sol"]))
    agg = joined.groupby(keys).agg(_k=("_log_known", "mean"), _g=("_log_gap", "mean")).reset_index()
    agg["best_known_sol"] = np.exp(agg.pop("_k"))
    agg["gap_to_best_known"] = np.exp(agg.pop("_g"))
    return agg.rename(columns={"solution": "candidate"})[cols]


def with_best_known(per_problem: pd.DataFrame, best: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """The per-problem ranking with ``baseline`` (the library, '' for others), ``best_known_sol`` and
    ``gap_to_best_known`` columns (NaN where no baseline passed a workload the candidate passed)."""
    labels = baseline_labels(records)
    table = per_problem.merge(gaps(best, best_known(best)), on=["problem", "gpu", "candidate"], how="left")
    table["baseline"] = table["candidate"].map(lambda c: labels.get(c, ""))
    return table


def problem_best_known(best: pd.DataFrame) -> pd.DataFrame:
    """Per (problem, gpu): the geomean over workloads of the best-known SOL, and which baselines set it."""
    known = best_known(best)
    if known.empty:
        return pd.DataFrame(columns=["problem", "gpu", "best_known_sol", "best_known_by"])
    known = known.assign(_log=np.log(known["best_known_sol"].clip(lower=1e-12)))
    agg = known.groupby(["problem", "gpu"]).agg(_log=("_log", "mean"),
                                                best_known_by=("best_known_by", lambda s: ", ".join(sorted(set(s)))))
    agg["best_known_sol"] = np.exp(agg.pop("_log"))
    return agg.reset_index()


__all__ = ["baseline_labels", "best_known", "gaps", "is_baseline", "problem_best_known", "with_best_known"]
