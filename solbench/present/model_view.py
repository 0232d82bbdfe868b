"""The model view: a decoder layer's ideal roll-up put against its ops' measured times, and its MFU.

For a model family and a scenario (:mod:`solbench.data.rollup`), each op of the layer takes the best
PASSED record at the scenario's workload (same axes, same GPU; optionally of a named candidate set),
and the view shows per op T_ideal, the measured time, SOL, its share of the ideal and of the measured
layer, and the time lost (measured minus ideal), ranked. For the layer: ideal and measured time, SOL
and MFU = layer FLOPs / (measured time x peak of the compute dtype). An op without a record is listed
with the command that makes it. A family's problem tagged ``whole-layer`` (the same layer as one
problem, eager ops) is the end-to-end check: its time against the sum of the ops' times is what
launch gaps and fusion are worth.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from solbench.data import (
    HardwareSpec,
    Phase,
    Problem,
    RollupError,
    Scenario,
    find_problems,
    in_phase,
    layer_problems,
    load_problem,
    load_spec,
    load_spec_id,
    point,
    problems_root,
    scenario,
    workload_at,
)
from solbench.engine import workload_work
from solbench.errors import SolbenchError, SpecError
from solbench.present.best_known import is_baseline
from solbench.present.markup import one_line

WHOLE_LAYER_TAG = "whole-layer"
OP_COLUMNS = ["op", "problem", "runs_per_layer", "workload", "flops", "bytes", "bound", "t_ideal_s", "t_measured_s",
              "sol", "candidate", "best_known_sol", "best_known_by", "ideal_share", "measured_share", "time_lost_s"]
# The scenarios of the report's model sections (and of the committed H200 records).
REPORT_SCENARIOS = (("decode", 1, 8192), ("decode", 64, 8192), ("prefill", 8192, None))


@dataclass
class ModelView:
    """One layer of ``model`` at ``scenario`` on ``spec``: ``ops`` (one row per op, columns
    ``OP_COLUMNS``, per layer: times and FLOPs are one run x runs_per_layer), the layer totals, the
    ops without a record (one line each, with the command that makes it) and the end-to-end check."""

    model: str
    scenario: Scenario
    spec: HardwareSpec
    candidates: tuple[str, ...]
    ops: pd.DataFrame
    layer: dict[str, Any]
    missing: list[str] = field(default_factory=list)
    end_to_end: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return not self.missing

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object: ``ops`` (op, problem, t_ideal_s, t_measured_s, sol, candidate, ...),
        ``layer`` (t_ideal_s, t_measured_s, sol, mfu, ...), ``missing`` and ``end_to_end``."""
        ops = [{k: _plain(v) for k, v in row.items()} for row in self.ops.to_dict("records")]
        return {"model": self.model, "scenario": self.scenario.name, "phase": self.scenario.phase,
                "tokens": self.scenario.tokens, "batch": self.scenario.batch, "context": self.scenario.context,
                "gpu": self.spec.id, "candidates": list(self.candidates) or ["*"], "ops": ops,
                "layer": {k: _plain(v) for k, v in self.layer.items()}, "missing": self.missing,
                "end_to_end": None if self.end_to_end is None else {k: _plain(v) for k, v in self.end_to_end.items()}}


def _plain(v: object) -> object:
    """A JSON-ready value: numpy scalars as Python numbers, NaN as None."""
    if hasattr(v, "item"):
        v = v.item()  # type: ignore[union-attr]
    return None if isinstance(v, float) and math.isnan(v) else v


def _problems(problems: Iterable[Problem] | str | Path | None, model: str | None = None) -> list[Problem]:
    """The problems given, or those of the folder (the library): only ``model``'s folder when it has one."""
    if problems is None or isinstance(problems, (str, Path)):
        root = problems_root(problems)
        folder = root / model if model and (root / model).is_dir() else root
        return [load_problem(p) for p in find_problems(folder)]
    return list(problems)


def _match(values: pd.Series, patterns: Sequence[str]) -> pd.Series:
    pats = [p.lower() for p in patterns]
    return values.map(lambda v: isinstance(v, str) and any(fnmatch.fnmatchcase(v.lower(), p) for p in pats))


def _at_axes(records: pd.DataFrame, axes: dict[str, int], workload: str | None) -> pd.Series:
    """Records run at exactly these axes (consts too, so a shrunk ``--small`` run never counts); a
    record without axes (older files) counts when its workload has the scenario's name."""
    cols = [f"axes.{a}" for a in axes]
    if not all(c in records.columns for c in cols):
        return records["workload"] == workload if workload else pd.Series(False, index=records.index)
    hit = pd.Series(True, index=records.index)
    for a, v in axes.items():
        hit &= records[f"axes.{a}"] == v
    no_axes = records[cols].isna().all(axis=1)
    return hit | (no_axes & (records["workload"] == workload) if workload else hit)


def best_record(records: pd.DataFrame, problem: Problem, sc: Scenario, gpu: str,
                candidates: Sequence[str] = ()) -> pd.Series | None:
    """The fastest PASSED record of ``problem`` at the scenario on ``gpu`` (of ``candidates``), or None."""
    mine = records[(records["problem"] == problem.name) & (records["status"] == "PASSED") & (records["gpu"] == gpu)]
    if candidates:
        mine = mine[_match(mine["solution"], candidates)]
    if mine.empty:
        return None
    w = workload_at(problem, sc)
    mine = mine[_at_axes(mine, problem.resolve_axes(sc.axes_for(problem)), w.name if w else None)]
    return None if mine.empty else mine.loc[mine["time_s"].idxmin()]


def _missing_line(problem: Problem, sc: Scenario, spec_id: str | HardwareSpec, candidates: Sequence[str]) -> str:
    """What to run for an op without a record; a calibrated spec is named by its file (its id alone
    may be an unknown GPU to `run`)."""
    w = workload_at(problem, sc)
    who = f" of {', '.join(candidates)}" if candidates else ""
    if isinstance(spec_id, HardwareSpec):
        spec_id = str(spec_id.path) if spec_id.kind == "measured" and spec_id.path else spec_id.id
    if w is None:
        axes = ", ".join(f"{a}: {v}" for a, v in sc.axes_for(problem).items())
        return (f"{problem.name}: no workload at {sc.name} ({{{axes}}}); add one to its problem.yaml, then "
                f"`solbench run {problem.name} --workload NAME --gpu {spec_id}`")
    return (f"{problem.name}: no PASSED record{who} at {sc.name} (workload {w.name}) on {spec_id}; make it with "
            f"`solbench run {problem.name} --workload {w.name} --gpu {spec_id}`")


def pick_gpu(records: pd.DataFrame, names: Iterable[str], gpu: str | None) -> HardwareSpec:
    """The spec of ``gpu``, or of the one GPU the PASSED records of these problems were scored on."""
    if gpu is not None:
        return load_spec(gpu)
    passed = records[records["problem"].isin(set(names)) & (records["status"] == "PASSED")]
    gpus = sorted({g for g in passed["gpu"] if isinstance(g, str)})
    if not gpus:
        raise RollupError("no PASSED record of this model's layer problems in these results: run them first "
                          "(scripts/run_model.py), or pass other result files")
    if len(gpus) > 1:
        raise RollupError(f"records of several GPUs ({', '.join(one_line(g, 40) for g in gpus)}): pick one with --gpu")
    try:
        return load_spec_id(gpus[0])  # a record's text: an id, never a path
    except SpecError as err:
        if not str(err).startswith("unknown GPU"):  # not an id at all: that error says so
            raise
        raise RollupError(f"these records were scored against {one_line(gpus[0], 60)}, not a spec id known here (a "
                          "calibrated spec: `solbench calibrate` and the demo write its file beside the records): "
                          "pass that file with --gpu PATH") from None


def _op_row(problem: Problem, sc: Scenario, spec: HardwareSpec, record: pd.Series | None) -> dict[str, Any]:
    axes = problem.resolve_axes(sc.axes_for(problem))
    runs = problem.runs_per_layer or 1
    flops, nbytes = workload_work(problem, axes)
    pt = point(flops * runs, nbytes * runs, problem.compute_dtype, spec, sc.name)
    w = workload_at(problem, sc)
    measured = float(record["time_s"]) * runs if record is not None else math.nan
    return {"op": problem.name.split(".", 1)[1], "problem": problem.name, "runs_per_layer": runs,
            "workload": w.name if w else None, "flops": pt.flops, "bytes": pt.bytes, "bound": pt.bound,
            "t_ideal_s": pt.t_ideal_s, "t_measured_s": measured, "sol": pt.t_ideal_s / measured,
            "candidate": record["solution"] if record is not None else None, "compute_dtype": problem.compute_dtype}


def _with_best_known(ops: pd.DataFrame, results: pd.DataFrame, problems: list[Problem], sc: Scenario,
                     spec: HardwareSpec) -> pd.DataFrame:
    """Each op's best library baseline at the scenario: its SOL (``best_known_sol``) and name (NaN / None if none)."""
    baselines = results[is_baseline(results)] if len(results) else results
    known = {p.name: best_record(baselines, p, sc, spec.id) if len(baselines) else None for p in problems}
    runs = dict(zip(ops["problem"], ops["runs_per_layer"], strict=True))
    ops["best_known_sol"] = [ideal / (float(known[p]["time_s"]) * runs[p]) if known[p] is not None else math.nan
                             for p, ideal in zip(ops["problem"], ops["t_ideal_s"], strict=True)]
    ops["best_known_by"] = [known[p]["solution"] if known[p] is not None else None for p in ops["problem"]]
    return ops


def _layer(ops: pd.DataFrame, spec: HardwareSpec, complete: bool) -> dict[str, Any]:
    """Totals: ideal and measured time (None while an op is missing), SOL, MFU at the main dtype's peak."""
    main_dtype = ops.loc[ops["flops"].idxmax(), "compute_dtype"] if len(ops) else "bfloat16"
    peak = spec.peak(main_dtype)
    flops, t_ideal = float(ops["flops"].sum()), float(ops["t_ideal_s"].sum())
    t_measured = float(ops["t_measured_s"].sum()) if complete else None
    return {"flops": flops, "bytes": float(ops["bytes"].sum()), "t_ideal_s": t_ideal, "t_measured_s": t_measured,
            "sol": t_ideal / t_measured if t_measured else None, "compute_dtype": main_dtype, "peak_flops": peak,
            "mfu": flops / (t_measured * peak) if t_measured else None, "ideal_mfu": flops / (t_ideal * peak)}


def _end_to_end(records: pd.DataFrame, family: list[Problem], sc: Scenario, spec: HardwareSpec,
                candidates: Sequence[str], ops_sum: float | None) -> dict[str, Any] | None:
    """The whole-layer problem's best record at the scenario against the sum of the ops' times."""
    whole = [p for p in family if WHOLE_LAYER_TAG in p.tags]
    if not whole:
        return None
    p = whole[0]
    try:
        axes = p.resolve_axes(sc.axes_for(p))
    except RollupError:
        return None
    rec = best_record(records, p, sc, spec.id, candidates)
    w = workload_at(p, sc)
    t = float(rec["time_s"]) if rec is not None else None
    pt = point(*workload_work(p, axes), p.compute_dtype, spec, sc.name)
    gap = t - ops_sum if t is not None and ops_sum else None
    return {"problem": p.name, "workload": w.name if w else None, "candidate": rec["solution"] if rec is not None else None,
            "t_measured_s": t, "t_ideal_s": pt.t_ideal_s, "ops_sum_s": ops_sum, "gap_s": gap,
            "gap_ratio": gap / ops_sum if gap is not None else None,
            "missing": None if t is not None else _missing_line(p, sc, spec, candidates)}


def model_view(results: pd.DataFrame, model: str, *, phase: Phase = "decode", tokens: int | None = None,
               batch: int | None = None, context: int | None = None, gpu: str | None = None,
               candidates: Sequence[str] = (), problems: Iterable[Problem] | str | Path | None = None) -> ModelView:
    """The model view of ``model`` (family name or Hugging Face id) at a scenario, from the records in
    ``results`` (a DataFrame from :func:`solbench.load_results`). Defaults: decode of 1 token over 8192
    cached positions; prefill of 8192 tokens. ``candidates``: names or globs; empty = best of all."""
    if tokens is None:
        tokens = 1 if phase == "decode" else 8192
    if phase == "decode" and context is None:
        context = 8192
    sc = scenario(tokens, phase, batch, context)
    loaded = _problems(problems, model)
    ops_problems = [p for p in layer_problems(loaded, model) if in_phase(p, sc.phase)]
    family = [p for p in loaded if p.name.split(".", 1)[0] == ops_problems[0].name.split(".", 1)[0]]
    spec = pick_gpu(results, [p.name for p in family], gpu)
    best = {p.name: best_record(results, p, sc, spec.id, candidates) for p in ops_problems}
    missing = [_missing_line(p, sc, spec, candidates) for p in ops_problems if best[p.name] is None]
    ops = pd.DataFrame([_op_row(p, sc, spec, best[p.name]) for p in ops_problems])
    ops = _with_best_known(ops, results, ops_problems, sc, spec)
    layer = _layer(ops, spec, not missing)
    ops["ideal_share"] = ops["t_ideal_s"] / layer["t_ideal_s"]
    ops["measured_share"] = ops["t_measured_s"] / layer["t_measured_s"] if layer["t_measured_s"] else math.nan
    ops["time_lost_s"] = ops["t_measured_s"] - ops["t_ideal_s"]
    ops = ops.sort_values(["time_lost_s", "t_ideal_s"], ascending=False, na_position="last").reset_index(drop=True)
    e2e = _end_to_end(results, family, sc, spec, candidates, layer["t_measured_s"])
    return ModelView(model, sc, spec, tuple(candidates), ops[OP_COLUMNS], layer, missing, e2e)


def report_views(results: pd.DataFrame, problems: Iterable[Problem] | str | Path | None = None) -> list[ModelView]:
    """The model views the report shows: each family with layer problems in the records, at each of
    ``REPORT_SCENARIOS`` where every op has a record, per GPU."""
    loaded = _problems(problems)
    families = sorted({p.name.split(".", 1)[0] for p in loaded if "decoder-layer" in p.tags
                       and p.name in set(results["problem"])})
    views = []
    for fam in families:
        gpus = sorted(set(results.loc[results["problem"].str.startswith(f"{fam}.") & (results["status"] == "PASSED"),
                                      "gpu"].dropna()))
        for gpu in gpus:
            views += _measured_views(results, fam, gpu, loaded)
    return views


def _measured_views(results: pd.DataFrame, family: str, gpu: str, loaded: list[Problem]) -> list[ModelView]:
    """The report scenarios of one family on one GPU with every op recorded (none: a GPU without a spec)."""
    views = []
    for phase, tokens, context in REPORT_SCENARIOS:
        try:
            view = model_view(results, family, phase=phase, tokens=tokens, context=context, gpu=gpu,  # type: ignore[arg-type]
                              problems=loaded)
        except SolbenchError:
            return []
        if view.complete:  # a partial layer (one op run on its own) is no model view
            views.append(view)
    return views
