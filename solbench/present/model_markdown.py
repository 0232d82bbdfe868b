"""The measured model tables of a markdown file: ``<!-- measured ... -->`` blocks, regenerated from records.

A block ``<!-- measured model=FAMILY phase=decode|prefill [tokens=N] [context=L] [batch=B] [gpu=ID]
[candidate=GLOB,...] results=FILE -->`` ... ``<!-- /measured -->`` holds the model view
(:func:`solbench.present.model_view.model_view`) of the records in FILE (relative to ``base``): per op
T_ideal, measured time, SOL, shares, time lost and the candidate, and the layer's MFU.
"""

from __future__ import annotations

import re
from pathlib import Path

from solbench.errors import SolbenchError
from solbench.present.frame import load_results
from solbench.present.model_view import ModelView, model_view
from solbench.units import si, sol_text

_BLOCK = re.compile(r"<!-- measured (?P<args>[^>]*?) -->\n(?P<body>.*?)<!-- /measured -->", re.S)
_INTS = ("tokens", "context", "batch")


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.1%}"


def view_markdown(view: ModelView) -> str:
    """The view as a markdown table (ranked by time lost), the layer row and a summary line."""
    head = ["op", "runs/layer", "T_ideal", "measured", "SOL", "ideal share", "measured share", "time lost",
            "candidate"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in view.ops.itertuples(index=False):
        cand = f"`{r.candidate}`" if isinstance(r.candidate, str) else "**missing**"
        lines.append(f"| {r.op} | {r.runs_per_layer} | {si(r.t_ideal_s, 's')} | {si(r.t_measured_s, 's')} | "
                     f"{sol_text(r.sol)} | {_pct(r.ideal_share)} | {_pct(r.measured_share)} | "
                     f"{si(r.time_lost_s, 's')} | {cand} |")
    lay = view.layer
    lost = lay["t_measured_s"] - lay["t_ideal_s"] if lay["t_measured_s"] else None
    lines.append(f"| **layer** | | **{si(lay['t_ideal_s'], 's')}** | **{si(lay['t_measured_s'], 's')}** | "
                 f"{sol_text(lay['sol'])} | 100% | {'100%' if lost is not None else '-'} | {si(lost, 's')} | |")
    lines.append("")
    lines.append(f"{view.scenario.name} on `{view.spec.id}`: MFU {_pct(lay['mfu'])} of the {lay['compute_dtype']} "
                 f"peak (ideal {_pct(lay['ideal_mfu'])})" + _e2e_text(view) + ".")
    lines.extend(f"- missing: {m}" for m in view.missing)
    return "\n".join(lines)


def _e2e_text(view: ModelView) -> str:
    e2e = view.end_to_end
    if not e2e or e2e["t_measured_s"] is None or e2e["gap_s"] is None:
        return ""
    return (f"; the whole layer as one problem (`{e2e['candidate']}`) takes {si(e2e['t_measured_s'], 's')} against "
            f"{si(e2e['ops_sum_s'], 's')} for its ops one by one ({e2e['gap_ratio']:+.1%})")


def _render_block(args: str, base: Path, results: str | None) -> tuple[str, str]:
    kv = dict(item.split("=", 1) for item in args.split() if "=" in item)
    if results is not None:
        kv["results"] = results
    if "model" not in kv or "results" not in kv:
        raise SolbenchError(f"measured marker '{args}': needs model=... results=FILE [phase= tokens= context= ...]")
    path = base / kv["results"]
    header = " ".join(f"{k}={v}" for k, v in kv.items())
    if not path.is_file():
        return header, (f"No records yet ({kv['results']} not found): run the H200 step, then "
                        "`python scripts/render_model_layers.py --results FILE`.")
    try:
        view = model_view(load_results(path, warn=False), kv["model"], phase=kv.get("phase", "decode"),  # type: ignore[arg-type]
                          gpu=kv.get("gpu"), candidates=tuple(kv["candidate"].split(",")) if "candidate" in kv else (),
                          **{k: int(kv[k]) for k in _INTS if k in kv})
    except ValueError as err:
        raise SolbenchError(f"measured marker '{args}': {err}") from None
    return header, view_markdown(view)


def render_measured(text: str, base: str | Path, results: str | None = None) -> str:
    """Regenerate every measured block; ``results`` (a path relative to ``base``) replaces each block's file."""
    def one(m: re.Match) -> str:
        header, body = _render_block(m.group("args"), Path(base), results)
        return f"<!-- measured {header} -->\n{body}\n<!-- /measured -->"

    return _BLOCK.sub(one, text)
