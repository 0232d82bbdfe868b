"""`solbench model`: a model's decoder layer at a scenario, its ops' measured times against the roll-up."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from solbench.cli._app import app
from solbench.cli._common import DEFAULT_RESULTS, console, err_console, fmt_time, json_text, load, plain
from solbench.cli.present import RESULTS_ARG
from solbench.units import si, sol_text

if TYPE_CHECKING:
    from solbench.present import ModelView


IDEAL_ONLY_GPU = "h200_sxm"  # the GPU of the library's published records


class PhaseChoice(str, Enum):
    decode = "decode"
    prefill = "prefill"


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.1%}"


def view_table(view: ModelView) -> Table:
    """The ops ranked by time lost, and the layer's totals in the last row."""
    sc = view.scenario
    who = ", ".join(view.candidates) if view.candidates else "best of all candidates"
    table = Table(title=f"{plain(view.model)} {plain(sc.name)} on {plain(view.spec.id)} ({plain(who)})",
                  title_justify="left")
    for col in ("op", "x", "T_ideal", "measured", "SOL", "best known", "ideal share", "measured share", "time lost",
                "candidate"):
        table.add_column(col, justify="left" if col in ("op", "candidate") else "right", no_wrap=True)
    for r in view.ops.itertuples(index=False):
        table.add_row(plain(r.op), str(r.runs_per_layer), fmt_time(r.t_ideal_s), fmt_time(r.t_measured_s),
                      sol_text(r.sol), sol_text(r.best_known_sol), _pct(r.ideal_share), _pct(r.measured_share),
                      fmt_time(r.time_lost_s),
                      plain(r.candidate) if isinstance(r.candidate, str) else "[yellow]missing[/]")
    lay = view.layer
    lost = lay["t_measured_s"] - lay["t_ideal_s"] if lay["t_measured_s"] else None
    table.add_row("[bold]layer[/]", "", fmt_time(lay["t_ideal_s"]), fmt_time(lay["t_measured_s"]),
                  sol_text(lay["sol"]), "", "100%", "100%" if lay["t_measured_s"] else "-", fmt_time(lost), "")
    return table


def _summary(view: ModelView) -> list[str]:
    lay = view.layer
    lines = [f"layer: {si(lay['flops'], 'FLOP')}, {si(lay['bytes'], 'B')}; MFU {_pct(lay['mfu'])} of the "
             f"{lay['compute_dtype']} peak ({si(lay['peak_flops'], 'FLOP/s')}); every op at its roofline would give "
             f"{_pct(lay['ideal_mfu'])}"]
    e2e = view.end_to_end
    if e2e and e2e["t_measured_s"] is not None:
        gap = (f"; the ops' sum is {fmt_time(e2e['ops_sum_s'])}, the whole layer takes {fmt_time(abs(e2e['gap_s']))} "
               f"{'more' if e2e['gap_s'] > 0 else 'less'} ({_pct(abs(e2e['gap_ratio']))}: launch gaps, fusion)"
               if e2e["gap_s"] is not None else "")
        lines.append(f"end to end: {e2e['problem']} ({e2e['candidate']}) {fmt_time(e2e['t_measured_s'])}, "
                     f"SOL {sol_text(e2e['t_ideal_s'] / e2e['t_measured_s'])} against a fused layer's ideal{gap}")
    elif e2e:
        lines.append(f"end to end: {e2e['missing']}")
    return lines


@app.command()
def model(
    family: str = typer.Argument(..., help="model family (llama3_1_8b) or Hugging Face id of the layer's problems"),
    results: list[Path] = RESULTS_ARG,
    phase: PhaseChoice = typer.Option(PhaseChoice.decode, "--phase", help="decode step or prefill"),
    tokens: int = typer.Option(None, "--tokens", min=1, help="decode: sequences (one token each) [1]; prefill: "
                               "prompt tokens [8192]"),
    context: int = typer.Option(None, "--context", min=1, help="decode: cached positions per sequence [8192]"),
    batch: int = typer.Option(None, "--batch", min=1, help="prefill: prompts the tokens split into [1]"),
    gpu: str = typer.Option(None, "--gpu", help="spec id [default: the one GPU of the records]"),
    candidate: list[str] = typer.Option(None, "--candidate", help="only these candidates (name or glob, "
                                        "repeatable), e.g. torch_eager [default: best of all]"),
    problems: Path = typer.Option(None, "--problems", help="problem folder [default: the library]"),
    chart: Path = typer.Option(None, "--chart", help="also write the measured-vs-ideal chart (.png, .svg, .pdf)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (ops, layer, missing, end_to_end)"),
) -> None:
    """A model's decoder layer: per op T_ideal, measured time, SOL, shares and time lost; the layer's MFU.

    Exits 1 when an op has no record (each is named with the command that makes it).
    """
    from solbench.present import model_view

    ideal_only = not results and not DEFAULT_RESULTS.is_dir()  # no records at all: the ideal table still tells a lot
    if ideal_only:
        from solbench.present import records_frame

        df, gpu = records_frame([]), gpu or IDEAL_ONLY_GPU
    else:
        df = load(results)
    view = model_view.model_view(df, family, phase=phase.value, tokens=tokens, batch=batch, context=context, gpu=gpu,
                      candidates=tuple(candidate or ()), problems=problems)
    if ideal_only:
        view.missing.clear()
        err_console.print(f"no results here: the ideal per-op times on {plain(view.spec.id)} only (--gpu ID for "
                          "another; run the ops, then pass their result files, for measured times)", highlight=False)
    if chart is not None:
        from solbench.present import model_figure, save

        save(model_figure([view]), chart)
    if as_json:
        typer.echo(json_text(view.as_dict()))
    else:
        console.print(view_table(view))
        for line in _summary(view):
            console.print(plain(line), highlight=False, soft_wrap=True)
    for line in view.missing:
        err_console.print(f"[yellow]missing:[/] {plain(line)}", highlight=False, soft_wrap=True)
    if chart is not None:
        err_console.print(f"chart: {plain(chart)}", highlight=False)
    if view.missing:
        raise typer.Exit(1)
