"""The report's profile tables: per problem, each profiled (candidate, workload) with its Tensor Core and
DRAM utilization, SM throughput, occupancy and diagnosis (`solbench profile`), and the problem's
hierarchical roofline. Plain data for the template: no markup here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from solbench.errors import SolbenchError
from solbench.present.chart_style import data_uri
from solbench.present.levels_chart import level_points, levels_figure
from solbench.present.markup import one_line
from solbench.units import si

HEADERS = ("workload", "candidate", "kernels", "DRAM bytes", "Tensor Core", "DRAM", "SM", "occupancy", "diagnosis")
_S = "profile.summary."


@dataclass
class ProfileTable:
    """One problem's profiled records, and its hierarchical roofline when a kernel counts FLOPs."""

    rows: list[list[str]]
    failed: list[bool]
    chart: tuple[str, str] | None = None  # (data URI, alt text)
    notes: list[str] = field(default_factory=list)


def _pct(x: object) -> str:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(v) else f"{v:.0f}%"


def _row(r: dict) -> tuple[list[str], bool]:
    head = [one_line(r["workload"]), one_line(r["solution"], 60)]
    if r.get("profile.status") != "ok":
        return [*head, "-", "-", "-", "-", "-", "-", f"not profiled: {one_line(r.get('profile.reason') or '', 200)}"], True
    kernels = r.get(_S + "kernels")
    bytes_ = r.get(_S + "dram_bytes")
    return [*head, "-" if kernels is None or pd.isna(kernels) else str(int(kernels)),
            si(None if bytes_ is None or pd.isna(bytes_) else float(bytes_), "B"), _pct(r.get(_S + "tensor_pipe_pct")),
            _pct(r.get(_S + "dram_pct")), _pct(r.get(_S + "sm_pct")), _pct(r.get(_S + "occupancy_pct")),
            one_line(r.get(_S + "diagnosis") or "")], False


def _chart(records: pd.DataFrame, charts: str) -> tuple[str, str] | None:
    if charts == "none" or level_points(records)[0].empty:
        return None
    try:
        fig = levels_figure(records)
    except SolbenchError:
        return None
    uri = data_uri(fig, charts)
    return uri, "hierarchical roofline: each profiled kernel at HBM, L2 and L1"


def profile_tables(records: pd.DataFrame, charts: str) -> dict[tuple[str, str], ProfileTable]:
    """(problem, GPU) -> its profile table, for the problems with at least one profiled record."""
    if "profile.status" not in records.columns:
        return {}
    profiled = records[records["profile.status"].notna()].sort_values(["problem", "workload", "solution"])
    out = {}
    for key, group in profiled.groupby(["problem", "gpu"], sort=True):
        cells = [_row(r) for r in group.to_dict("records")]
        ok = group[group["profile.status"] == "ok"]
        version = ok.get("profile.tool_version", pd.Series(dtype=object)).dropna()
        tool = one_line(version.iloc[0], 80) if not version.empty else "ncu"
        notes = [f"Nsight Compute ({tool}), one call each; utilizations are % of peak, weighted by kernel duration "
                 "(docs/profiling.md)."] if not ok.empty else []
        chart = _chart(ok, charts) if not ok.empty else None
        out[key] = ProfileTable([c for c, _ in cells], [f for _, f in cells], chart, notes)
    return out
