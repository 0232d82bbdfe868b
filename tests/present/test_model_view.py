"""solbench model: the Llama-3.1-8B layer's roll-up against synthetic records whose times are chosen
here (T_ideal / a chosen SOL), so every per-op and layer figure is checked against that choice; the
best-record and candidate-set rules, missing ops, the end-to-end check, the CLI, the chart and the
generated markdown blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.cli import app
from solbench.data.hardware import load_spec
from solbench.data.problem import load_problem
from solbench.data.results import append_records
from solbench.data.rollup import in_phase, layer_problems, scenario, workload_at
from solbench.data.roofline import point
from solbench.present.frame import load_results
from solbench.present.model_markdown import render_measured
from solbench.present.model_view import model_view

ROOT = Path(__file__).resolve().parents[2]
FAMILY = ROOT / "problems" / "llama3_1_8b"
SPEC = load_spec("h200_sxm")
DECODE = scenario(1, "decode", context=8192)


@pytest.fixture(scope="module")
def problems():
    return [load_problem(p.parent) for p in sorted(FAMILY.glob("*/problem.yaml"))]


def _record(problem, sc, solution, sol, *, axes=None):
    axes = axes or problem.resolve_axes(sc.axes_for(problem))
    pt = point(problem.flops_for(axes), problem.bytes_for(axes), problem.compute_dtype, SPEC, "w")
    w = workload_at(problem, sc)
    return {"problem": problem.name, "workload": w.name if w else "x", "solution": solution, "status": "PASSED",
            "device": "NVIDIA H200", "gpu_spec": "h200_sxm", "time_s": pt.t_ideal_s / sol, "sol": sol,
            "flops": pt.flops, "bytes": pt.bytes, "t_ideal_s": pt.t_ideal_s, "bound": pt.bound,
            "timestamp": "2026-12-02T00:00:00+00:00", "solbench_version": "0", "axes": axes}


def _layer_ops(problems, sc):
    return [p for p in layer_problems(problems, "llama3_1_8b") if in_phase(p, sc.phase)]


def _write(tmp_path, problems, sc, sols, extra=()):
    """Records of every layer op: an eager one at SOL sols[op] and a slower triton one; returns the file."""
    records = []
    for p in _layer_ops(problems, sc):
        op = p.name.split(".", 1)[1]
        records.append(_record(p, sc, "torch_eager", sols[op]))
        records.append(_record(p, sc, "triton_x", sols[op] / 2))
    path = tmp_path / "r.jsonl"
    append_records(path, records + list(extra))
    return path


SOLS = {"rmsnorm": 0.1, "qkv_proj": 0.8, "rope": 0.05, "kv_cache_append": 0.01, "attention_decode": 0.9,
        "attn_o_proj_residual": 0.7, "gate_up_swiglu": 0.85, "mlp_down_proj_residual": 0.75}


def test_layer_figures_follow_the_chosen_times(tmp_path, problems):
    df = load_results(_write(tmp_path, problems, DECODE, SOLS), warn=False)
    view = model_view(df, "llama3_1_8b", phase="decode", tokens=1, context=8192, problems=problems)
    assert view.complete and view.spec.id == "h200_sxm"
    ops = view.ops.set_index("op")
    expected_total, ideal_total, flops = 0.0, 0.0, 0.0
    for p in _layer_ops(problems, DECODE):
        op, axes = p.name.split(".", 1)[1], p.resolve_axes(DECODE.axes_for(p))
        runs = p.runs_per_layer
        t_ideal = max(p.flops_for(axes) / SPEC.peak("bfloat16"), p.bytes_for(axes) / SPEC.memory_bandwidth) * runs
        assert ops.loc[op, "t_ideal_s"] == pytest.approx(t_ideal)
        assert ops.loc[op, "t_measured_s"] == pytest.approx(t_ideal / SOLS[op])  # the faster (eager) record
        assert ops.loc[op, "sol"] == pytest.approx(SOLS[op])
        assert ops.loc[op, "candidate"] == "torch_eager"
        expected_total += t_ideal / SOLS[op]
        ideal_total += t_ideal
        flops += p.flops_for(axes) * runs
    lay = view.layer
    assert lay["t_measured_s"] == pytest.approx(expected_total)
    assert lay["sol"] == pytest.approx(ideal_total / expected_total)
    assert lay["mfu"] == pytest.approx(flops / (expected_total * SPEC.peak("bfloat16")))
    assert ops["measured_share"].sum() == pytest.approx(1.0) and ops["ideal_share"].sum() == pytest.approx(1.0)
    lost = list(view.ops["time_lost_s"])
    assert lost == sorted(lost, reverse=True)  # ranked: the op that costs most first


def test_candidate_set_and_missing_ops(tmp_path, problems):
    df = load_results(_write(tmp_path, problems, DECODE, SOLS), warn=False)
    view = model_view(df, "llama3_1_8b", candidates=("triton_*",), problems=problems)
    assert set(view.ops["candidate"]) == {"triton_x"}
    assert view.ops.set_index("op").loc["rope", "sol"] == pytest.approx(SOLS["rope"] / 2)
    b64 = model_view(df, "llama3_1_8b", tokens=64, problems=problems)  # nothing recorded at batch 64
    assert not b64.complete and b64.layer["mfu"] is None and len(b64.missing) == len(_layer_ops(problems, DECODE))
    assert any("solbench run llama3_1_8b.attention_decode --workload decode_b64_kv8192" in m for m in b64.missing)


def test_a_shrunk_run_never_counts(tmp_path, problems):
    rms = next(p for p in problems if p.name == "llama3_1_8b.rmsnorm")
    small = _record(rms, DECODE, "tiny", 0.99, axes={"T": 1, "H": 64})  # same workload name, other axes
    df = load_results(_write(tmp_path, problems, DECODE, SOLS, [small]), warn=False)
    view = model_view(df, "llama3_1_8b", problems=problems)
    assert view.ops.set_index("op").loc["rmsnorm", "candidate"] == "torch_eager"


def test_end_to_end_gap(tmp_path, problems):
    whole = next(p for p in problems if "whole-layer" in p.tags)
    e2e = _record(whole, DECODE, "torch_eager", 0.5)
    df = load_results(_write(tmp_path, problems, DECODE, SOLS, [e2e]), warn=False)
    view = model_view(df, "llama3_1_8b", problems=problems)
    got = view.end_to_end
    assert got["t_measured_s"] == pytest.approx(e2e["time_s"])
    assert got["gap_s"] == pytest.approx(e2e["time_s"] - view.layer["t_measured_s"])


def test_whole_layer_flops_equal_the_rollup(problems):
    """The end-to-end problem is the same layer: its FLOPs are the ops' FLOPs summed, in both phases."""
    whole = next(p for p in problems if "whole-layer" in p.tags)
    for sc in (DECODE, scenario(64, "decode", context=4096), scenario(2048, "prefill")):
        ops = _layer_ops(problems, sc)
        total = sum(p.flops_for(p.resolve_axes(sc.axes_for(p))) * p.runs_per_layer for p in ops)
        assert whole.flops_for(whole.resolve_axes(sc.axes_for(whole))) == total


def test_cli_json_exit_codes_and_chart(tmp_path, problems):
    path = _write(tmp_path, problems, DECODE, SOLS)
    runner = CliRunner()
    res = runner.invoke(app, ["model", "llama3_1_8b", str(path), "--json", "--chart", str(tmp_path / "m.svg")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {"op", "problem", "t_ideal_s", "t_measured_s", "sol", "candidate"} <= set(doc["ops"][0])
    assert {"t_ideal_s", "t_measured_s", "sol", "mfu"} <= set(doc["layer"])
    assert (tmp_path / "m.svg").read_text().startswith("<?xml")
    res = runner.invoke(app, ["model", "llama3_1_8b", str(path), "--phase", "prefill"])
    assert res.exit_code == 1 and "solbench run llama3_1_8b.attention_prefill" in res.output
    res = runner.invoke(app, ["model", "no_such_model", str(path)])
    assert res.exit_code != 0 and "no problem of model 'no_such_model'" in str(res.exception or res.output)


def test_a_gpu_named_by_a_record_is_never_a_path_to_open(tmp_path, problems):
    """Records whose gpu_spec names a file (any one can write a results file): the view refuses it in
    one line that names no content of that file, and never opens it."""
    secret = tmp_path / "secret.yaml"
    secret.write_text("root:$6$SECRETHASH:19000:0:99999:7:::\n")
    records = [dict(r, gpu_spec=str(secret)) for r in
               (_record(p, DECODE, "torch_eager", SOLS[p.name.split(".", 1)[1]]) for p in _layer_ops(problems, DECODE))]
    path = tmp_path / "r.jsonl"
    append_records(path, records)
    res = CliRunner().invoke(app, ["model", "llama3_1_8b", str(path)])
    assert res.exit_code != 0 and "SECRETHASH" not in res.output and "SECRETHASH" not in str(res.exception)
    assert "is not a spec id" in str(res.exception) + res.output and "Traceback" not in res.output


def test_measured_markdown_block(tmp_path, problems):
    path = _write(tmp_path, problems, DECODE, SOLS)
    text = "<!-- measured model=llama3_1_8b phase=decode tokens=1 context=8192 results=old.jsonl -->\n<!-- /measured -->"
    out = render_measured(text, tmp_path, results=path.name)
    assert f"results={path.name}" in out and "| **layer** |" in out and "missing" not in out
    assert render_measured(out, tmp_path) == out  # regenerating is stable
    assert "No records yet" in render_measured(text, tmp_path)


def test_report_has_a_model_section(tmp_path, problems):
    from solbench.present.report import build_report

    df = load_results(_write(tmp_path, problems, DECODE, SOLS), warn=False)
    html = build_report(df, charts="svg", workers=1)
    assert 'id="models"' in html and "decode_b1_kv8192" in html and "gate_up_swiglu" in html
    assert "data:image/svg+xml;base64," in html


def test_best_known_column_is_the_fastest_library_baseline(tmp_path, problems):
    att = next(p for p in _layer_ops(problems, DECODE) if p.name.endswith(".attention_decode"))
    baselines = [_record(att, DECODE, "lib_torch_sdpa_flash", 0.6), _record(att, DECODE, "lib_torch_sdpa_cudnn", 0.45)]
    df = load_results(_write(tmp_path, problems, DECODE, SOLS, extra=baselines), warn=False)
    view = model_view(df, "llama3_1_8b", candidates=("torch_eager",), problems=problems)
    ops = view.ops.set_index("op")
    assert ops.loc["attention_decode", "best_known_sol"] == pytest.approx(0.6)
    assert ops.loc["attention_decode", "best_known_by"] == "lib_torch_sdpa_flash"
    assert ops.loc["attention_decode", "sol"] == pytest.approx(SOLS["attention_decode"])  # the chosen candidate's
    assert ops.drop(index="attention_decode")["best_known_sol"].isna().all()
