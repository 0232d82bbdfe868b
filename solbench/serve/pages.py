"""What the service shows: the leaderboard of a problem per GPU (as JSON and as a page, with the
best-known columns against the library baselines, the best result per workload and the roofline chart) and a submission's page, built with the
presentation layer's ranking, tables, charts and templates. Pages run no script (the report's CSP);
every name and log is autoescaped text."""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from solbench.present import one_line
from solbench.serve.store import LIBRARY
from solbench.units import si, sol_text

_CHART_LOCK = threading.Lock()  # matplotlib figures are drawn one at a time (request threads share it)
SERVE_TEMPLATES = Path(__file__).resolve().parent / "templates"


@lru_cache(maxsize=1)
def _environment() -> Any:
    """The report's jinja environment (filters, autoescape), looking in this folder first."""
    import jinja2

    from solbench.present import environment

    base = environment()
    return base.overlay(loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(SERVE_TEMPLATES)), base.loader]))


def render(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)


def labelled(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records as a leaderboard shows them: a user's candidate named by its submission (``#12 kernel``:
    two people's ``kernel.py`` are two rows) and never taken for a library baseline, whatever its file
    says; the library's own baselines (``solbench serve baselines``) by their names, so the best-known
    columns compare every submission with them."""
    return [_labelled(r) for r in records]


def _labelled(r: dict[str, Any]) -> dict[str, Any]:
    plain = {k: v for k, v in r.items() if not k.startswith("_")}
    if r.get("_owner") == LIBRARY:
        return plain
    return {**plain, "solution": f"#{r['_submission']} {r['solution']}", "baseline": None}


def _frame(records: list[dict[str, Any]]) -> Any:
    from solbench.present import records_frame

    return records_frame(labelled(records))


def best_per_workload(lb: Any) -> list[dict[str, Any]]:
    """Per (GPU, workload): the best SOL any candidate reached, its time and who holds it."""
    best = lb.best
    if best.empty:
        return []
    top = best.sort_values(["sol", "timestamp"], ascending=[False, True]).drop_duplicates(["gpu", "workload"])
    return [{"gpu": str(r["gpu"]), "workload": str(r["workload"]), "sol": float(r["sol"]),
             "time_s": float(r["time_s"]), "holder": str(r["solution"])}
            for r in top.sort_values(["gpu", "workload"]).to_dict("records")]


def leaderboard_data(records: list[dict[str, Any]], problem: str, gpu: str | None) -> tuple[Any, dict[str, Any]]:
    """The ranking (present's Leaderboard) of one problem's records, on ``gpu`` if given, and its JSON."""
    from solbench.present import Selection, ranking

    if not records:
        return None, {"problem": problem, "gpu": gpu, "rows": [], "best_per_workload": [], "roof": None}
    lb = ranking.leaderboard(_frame(records), Selection(problem=problem, gpu=gpu or ()))
    data = lb.to_dict()
    return lb, {"problem": problem, "gpu": gpu, "roof": data["roof"], "rows": data["problems"],
                "best_per_workload": best_per_workload(lb), "notes": data["left_out"] + data["warnings"]}


def _roofline(lb: Any, gpu: str, number: int) -> tuple[str, str] | None:
    """The roofline chart of one GPU's records, inline SVG, or None when nothing passed with FLOPs."""
    from solbench.present import inline_svg, palette_for, roofline_figure, to_bytes

    recs = lb.records[lb.records["gpu"] == gpu]
    ok = (recs["status"] == "PASSED") & (recs["flops"] > 0) & (recs["achieved_flops_per_s"] > 0)
    if not ok.any():
        return None
    alt = f"roofline chart: {one_line(gpu)}"
    with _CHART_LOCK, palette_for(lb.records["solution"]):
        return inline_svg(to_bytes(roofline_figure(recs), "svg"), f"chart{number}", alt), alt


def leaderboard_page(records: list[dict[str, Any]], problem: str, gpu: str | None) -> str:
    from solbench.present import display_tables

    lb, data = leaderboard_data(records, problem, gpu)
    gpus = []
    if lb is not None:
        tables = [t for t in display_tables(lb) if t.kind == "problem"]
        for i, t in enumerate(tables):
            best = [b for b in data["best_per_workload"] if b["gpu"] == t.gpu]
            gpus.append({"table": t, "best": best, "chart": _roofline(lb, t.gpu, i)})
    return render("serve_leaderboard.html.j2", title=f"{one_line(problem)} leaderboard", problem=problem,
                  roof_phrase=lb.roof_phrase if lb is not None else "", gpus=gpus, warnings=data.get("notes", []),
                  fmt_time=_fmt_time, sol=sol_text)


def submission_page(sub: dict[str, Any], records: list[dict[str, Any]]) -> str:
    return render("serve_submission.html.j2", title=f"submission #{sub['id']}", sub=sub, records=records,
                  final=sub["state"] in ("done", "failed", "error"), fmt_time=_fmt_time, sol=sol_text)


def index_page(boards: list[tuple[str, str, int]], submissions: list[dict[str, Any]]) -> str:
    return render("serve_index.html.j2", title="solbench serve", boards=boards, submissions=submissions)


def _fmt_time(seconds: float | None) -> str:
    return si(seconds, "s")
