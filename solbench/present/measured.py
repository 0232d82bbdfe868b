"""Declared against measured: a problem's FLOP and byte formulas next to what Nsight Compute counted.

For every (problem, workload, GPU) with profiled records (``profile`` from `solbench profile`), the
candidate whose call moved the fewest DRAM bytes stands for the formula: a formula counts the
traffic of an ideal, fused kernel, so an unfused candidate that moves more is that candidate's cost,
not the formula's error. Its counted FLOPs and DRAM bytes (read + written) are divided by the
declared ones; a ratio off by more than ``TOLERANCE`` is a disagreement to fix or to explain in the
problem file (its ``measured:`` key, per quantity; ``solbench validate --measured``).

What the counters cannot see is said in the note: FLOPs are counted from FP add/mul/fma and
tensor-core instructions, so transcendentals (exp, rsqrt) and integer work are not; DRAM bytes
miss writes still held in L2 when the kernel ends (ncu measures one kernel at a time).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import pandas as pd

from solbench.present.markup import one_line

TOLERANCE = 0.10
_COLUMNS = {"flops": "profile.summary.flops", "bytes": "profile.summary.dram_bytes",
            "status": "profile.status"}


@dataclass
class MeasuredRow:
    """One (problem, workload, GPU): declared and counted FLOPs and bytes, and their ratios."""

    problem: str
    workload: str
    gpu: str
    candidate: str
    candidates: int
    declared_flops: float
    measured_flops: float | None
    flops_ratio: float | None
    declared_bytes: float
    measured_bytes: float | None
    bytes_ratio: float | None
    disagrees: bool
    note: str = ""
    explained: str = ""  # the problem file's reasons for the quantities that disagree
    unexplained: bool = False  # a quantity disagrees and the problem file says nothing about it

    def as_dict(self) -> dict:
        return asdict(self)


def _ratio(measured: float | None, declared: float) -> float | None:
    if measured is None or (isinstance(measured, float) and math.isnan(measured)) or declared <= 0:
        return None
    return float(measured) / declared


def _off(ratio: float | None, tolerance: float) -> bool:
    return ratio is not None and abs(ratio - 1.0) > tolerance


def _note(flops_ratio: float | None, bytes_ratio: float | None, declared_flops: float) -> str:
    """What a reader should check first for a disagreement."""
    notes = []
    if flops_ratio is None and declared_flops > 0:
        notes.append("FLOPs not counted (tensor pipes ran without a tensor FLOP counter)")
    elif flops_ratio is not None and flops_ratio < 1 - TOLERANCE:
        notes.append("fewer FLOPs counted: transcendentals and integer work are not counted, or the formula "
                     "counts work the kernels skip")
    elif flops_ratio is not None and flops_ratio > 1 + TOLERANCE:
        notes.append("more FLOPs counted: the formula leaves work out, or the kernels do redundant work")
    if bytes_ratio is not None and bytes_ratio < 1 - TOLERANCE:
        notes.append("fewer DRAM bytes: data read twice in the formula, writes left in L2, or inputs never read")
    elif bytes_ratio is not None and bytes_ratio > 1 + TOLERANCE:
        notes.append("more DRAM bytes: intermediates through memory, re-reads, or traffic the formula omits")
    return "; ".join(notes)


def profiled(df: pd.DataFrame) -> pd.DataFrame:
    """The passed records that carry a profile that was taken."""
    if _COLUMNS["status"] not in df.columns:
        return df.iloc[0:0]
    ok = (df["status"] == "PASSED") & (df[_COLUMNS["status"]] == "ok") & df[_COLUMNS["bytes"]].notna()
    return df[ok]


def measured_rows(df: pd.DataFrame, tolerance: float = TOLERANCE,
                  explanations: Mapping[str, Mapping[str, str]] | None = None) -> list[MeasuredRow]:
    """One row per (problem, workload, GPU) of the profiled records in ``df`` (from ``load_results``);
    ``explanations``: problem -> {"flops"|"bytes": why} (each problem file's ``measured:``)."""
    rows = []
    for (problem, workload, gpu), group in profiled(df).groupby(["problem", "workload", "gpu"], sort=True):
        best = group.sort_values(_COLUMNS["bytes"]).iloc[0]
        declared_flops, declared_bytes = float(best["flops"]), float(best["bytes"])
        measured_flops = best.get(_COLUMNS["flops"])
        measured_flops = None if measured_flops is None or pd.isna(measured_flops) else float(measured_flops)
        measured_bytes = float(best[_COLUMNS["bytes"]])
        fr, br = _ratio(measured_flops, declared_flops), _ratio(measured_bytes, declared_bytes)
        off = [q for q, r in (("flops", fr), ("bytes", br)) if _off(r, tolerance)]
        why = (explanations or {}).get(problem, {})
        rows.append(MeasuredRow(one_line(problem), one_line(workload), one_line(gpu), one_line(best["solution"], 60),
                                group["solution"].nunique(), declared_flops, measured_flops, fr, declared_bytes,
                                measured_bytes, br, bool(off), _note(fr, br, declared_flops) if off else "",
                                "; ".join(f"{q}: {one_line(why[q], 400).rstrip('.')}" for q in off if why.get(q)),
                                any(not why.get(q) for q in off)))
    return rows


def _ratio_text(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def markdown_table(rows: list[MeasuredRow]) -> str:
    """The rows as a markdown table (the one in docs/profiling.md)."""
    from solbench.units import si

    lines = ["| problem | workload | candidate (fewest bytes) | FLOPs declared | counted | ratio | bytes declared "
             "| DRAM bytes | ratio | note |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r.problem} | {r.workload} | {r.candidate} | {si(r.declared_flops)} | {si(r.measured_flops)} "
                     f"| {_ratio_text(r.flops_ratio)} | {si(r.declared_bytes, 'B')} | {si(r.measured_bytes, 'B')} "
                     f"| {_ratio_text(r.bytes_ratio)} | {note_text(r)} |")
    return "\n".join(lines) + "\n"


def note_text(r: MeasuredRow) -> str:
    """The note a reader sees: agreement, the problem file's explanation, or what to check first."""
    if not r.disagrees:
        return "agrees within 10%"
    return f"explained in the problem file: {r.explained}" if r.explained and not r.unexplained else r.note
