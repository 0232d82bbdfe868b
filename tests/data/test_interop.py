"""Importing FlashInfer-Trace definitions and KernelBench modules, exporting traces (published fixtures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import solbench
from solbench.data.hardware import load_spec
from solbench.data.interop.flashinfer_trace import ImportRefused, import_definition
from solbench.data.interop.solutions import import_solution
from solbench.data.interop.traces import export_traces
from solbench.data.problem import load_problem
from solbench.data.record import Status
from solbench.data.roofline import problem_points
from solbench.engine.kernelbench import import_module

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "interop"
FI = FIX / "flashinfer_trace"
KB = FIX / "kernelbench"
ROOT = Path(__file__).resolve().parents[2]


def test_rmsnorm_definition_imports_with_its_workloads_and_template_flops(tmp_path):
    problem_file, _ = import_definition(FI / "rmsnorm_h4096.json", tmp_path / "p", FI / "rmsnorm_h2048.jsonl")
    p = load_problem(problem_file)
    assert [w.axes["batch_size"] for w in p.workloads] == [6, 1, 34, 79, 16254]
    assert p.compute_dtype == "bfloat16" and p.source.model == "llama-3.1-8b"
    axes = p.resolve_axes(p.workloads[4])
    assert p.flops_for(axes) == 4 * 16254 * 4096
    assert p.bytes_for(axes) == 2 * (2 * 16254 * 4096 + 4096)  # bf16 in + out + weight
    t_ideal = {pt.workload: pt.t_ideal_s for pt in problem_points(p, load_spec("h200_sxm"))}
    assert t_ideal[p.workloads[4].name] == pytest.approx(p.bytes_for(axes) / 4.8e12)


@pytest.mark.parametrize(("definition", "workloads"), [("rope_h32_d128.json", "rope_h32_d128.jsonl"),
                                                        ("silu_and_mul_i3584.json", "silu_and_mul_i3584.jsonl")])
def test_rope_and_gated_activation_reference_runs_at_declared_shapes(tmp_path, definition, workloads):
    from solbench.engine.cases import reference_outputs
    from solbench.engine.problem_code import load_reference, make_inputs

    p = load_problem(import_definition(FI / definition, tmp_path / "p", FI / workloads)[0])
    axes = p.resolve_axes(p.workloads[0])
    out = reference_outputs(p, axes, load_reference(p), make_inputs(p, axes, 3))  # checks shapes and dtypes
    assert set(out) == set(p.outputs)


def test_missing_safetensors_input_is_refused_in_one_line(tmp_path):
    with pytest.raises(ImportRefused, match="rmsnorm_h4096_st0.safetensors, not found"):
        import_definition(FI / "rmsnorm_h4096.json", tmp_path / "p", FI / "rmsnorm_stored.jsonl", tmp_path)
    cli = subprocess.run([sys.executable, "-m", "solbench", "import", "flashinfer-trace", str(FI / "rmsnorm_h4096.json"),
                          "--workloads", str(FI / "rmsnorm_stored.jsonl"), "-o", str(tmp_path / "q")],
                         capture_output=True, text=True, cwd=ROOT)
    assert cli.returncode != 0 and "Traceback" not in cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1 and "pass --data ROOT" in cli.stderr


def test_linear_backward_custom_inputs_and_its_solution_pass_on_cpu(tmp_path):
    folder = tmp_path / "lb"
    problem_file, _ = import_definition(FI / "linear_backward" / "definition.json", folder,
                                        FI / "linear_backward" / "workload.jsonl")
    defn = json.loads((FI / "linear_backward" / "definition.json").read_text())
    candidate = import_solution(FI / "linear_backward" / "solution_python.json", folder / "solutions", defn)
    result = solbench.run_problems([problem_file], [candidate], device="cpu", rounds=3, budget_s=0.05,
                                   workers_ahead=0, output=tmp_path / "r.jsonl")
    assert [r.status for r in result.records] == [Status.PASSED.value] * 2, [r.reason for r in result.records]


@pytest.mark.parametrize(("file", "flops"), [
    ("level1/1_Square_matrix_multiplication_.py", 2 * 4096**3),
    ("level2/12_Gemm_Multiply_LeakyReLU.py", 2 * 1024 * 8192 * 8192),
    ("level2/1_Conv2D_ReLU_BiasAdd.py", 2 * 128 * 128 * 126 * 126 * 64 * 3 * 3),
    ("level1/23_Softmax.py", 0),
])
def test_kernelbench_modules_import_with_counted_flops(tmp_path, file, flops):
    problem_file, notes = import_module(KB / file, tmp_path / "p")
    p = load_problem(problem_file)
    assert p.flops_for(p.resolve_axes(p.workloads[0])) == flops
    assert bool(notes) == (flops == 0)  # an uncounted module is flagged
    if "Gemm" in file:  # parameters become inputs, after forward's own
        assert list(p.inputs) == ["x0", "p_gemm_weight", "p_gemm_bias"]


def test_kernelbench_reference_matches_the_module(tmp_path):
    import torch

    from solbench.engine.problem_code import load_reference

    source = (KB / "level2" / "12_Gemm_Multiply_LeakyReLU.py").read_text().replace("1024", "4").replace("8192", "16")
    (tmp_path / "small.py").write_text(source)
    p = load_problem(import_module(tmp_path / "small.py", tmp_path / "p")[0])
    ns: dict = {}
    exec(compile(source, "small", "exec"), ns)
    model = ns["Model"](*ns["get_init_inputs"]())
    x = torch.rand(4, 16, dtype=torch.bfloat16)
    got = load_reference(p)(x, model.gemm.weight.detach(), model.gemm.bias.detach())
    assert torch.equal(got, model(x).detach())


def test_export_traces_from_records(tmp_path):
    out = tmp_path / "traces.jsonl"
    assert export_traces([ROOT / "results" / "h200" / "show_2026-11-30.jsonl"], out) > 0
    traces = [json.loads(line) for line in out.read_text().splitlines()]
    records = [json.loads(line) for line in (ROOT / "results" / "h200" / "show_2026-11-30.jsonl").read_text().splitlines()]
    for t, r in zip(traces, records, strict=True):
        assert t["definition"] == r["problem"] and t["solution"] == r["solution"]
        assert t["evaluation"]["performance"]["latency_ms"] == (r["time_s"] * 1e3 if r["status"] == "PASSED" else None)


def _variant_with_eps_and_constraints(tmp_path: Path, eps_values: list[float], batch: list[int]) -> tuple[Path, Path]:
    """The published rmsnorm_h4096 definition with eps made a scalar input and constraints added (as
    FlashInfer-Trace's gqa definitions carry them), and workloads giving eps per workload."""
    defn = json.loads((FI / "rmsnorm_h4096.json").read_text())
    defn["inputs"]["eps"] = {"shape": None, "dtype": "float32"}
    defn["constraints"] = ["hidden_size == 4096", "batch_size <= 65536", "num_tokens == kv_indptr[-1].item()"]
    defn["reference"] = defn["reference"].replace("def run(hidden_states, weight):", "def run(hidden_states, weight, eps):")
    (tmp_path / "d.json").write_text(json.dumps(defn))
    lines = [json.dumps({"uuid": f"u{i}", "axes": {"batch_size": b}, "inputs": {
        "hidden_states": {"type": "random"}, "weight": {"type": "random"}, "eps": {"type": "scalar", "value": e}}})
        for i, (b, e) in enumerate(zip(batch, eps_values, strict=True))]
    (tmp_path / "w.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path / "d.json", tmp_path / "w.jsonl"


def test_scalars_per_workload_and_axis_constraints_are_kept(tmp_path):
    d, w = _variant_with_eps_and_constraints(tmp_path, [1e-5, 1e-6], [3, 5])
    problem_file, notes = import_definition(d, tmp_path / "p", w)
    p = load_problem(problem_file)
    assert [p.scalars_for(wl)["eps"] for wl in p.workloads] == [1e-5, 1e-6]
    assert p.constraints == ["hidden_size == 4096", "batch_size <= 65536"]  # checked by solbench
    assert any("kv_indptr[-1].item()" in n and "not checked" in n for n in notes)


def test_a_workload_breaking_a_constraint_is_refused_at_load(tmp_path):
    from solbench.errors import ProblemError

    d, w = _variant_with_eps_and_constraints(tmp_path, [1e-5], [70000])
    problem_file, _ = import_definition(d, tmp_path / "p", w)
    with pytest.raises(ProblemError, match="batch_size <= 65536"):
        load_problem(problem_file)


def test_a_workload_without_a_scalar_value_is_refused_in_one_line(tmp_path):
    d, w = _variant_with_eps_and_constraints(tmp_path, [1e-5, 1e-6], [3, 5])
    w.write_text(w.read_text().replace(', "eps": {"type": "scalar", "value": 1e-06}', ""))
    with pytest.raises(ImportRefused, match="workload u1 gives no value"):
        import_definition(d, tmp_path / "p", w)


def test_export_of_a_missing_results_file_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "traces.jsonl"
    cli = subprocess.run([sys.executable, "-m", "solbench", "export", "flashinfer-trace", str(tmp_path / "nope.jsonl"),
                          "-o", str(out)], capture_output=True, text=True)
    assert cli.returncode != 0 and not out.exists()
    assert cli.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.jsonl'}: no such file or folder: "
                                               "pass result files (.jsonl) or folders of them"]


def test_kernelbench_import_names_tags_starter_and_never_overwrites(tmp_path):
    """A module outside a levelN/ folder is kernelbench.<name> (not kernelbench.kernelbench_<name>), each
    tag once; a starter candidate that computes what the reference does; an existing folder refused
    unless forced."""
    import torch

    from solbench.data.interop.flashinfer_trace import ImportRefused
    from solbench.engine.problem_code import load_reference
    from solbench.worker.candidate import import_file, module_name

    source = (KB / "level2" / "12_Gemm_Multiply_LeakyReLU.py").read_text().replace("1024", "4").replace("8192", "16")
    (tmp_path / "kb_module.py").write_text(source)
    out = tmp_path / "p"
    p = load_problem(import_module(tmp_path / "kb_module.py", out)[0])
    assert p.name == "kernelbench.kb_module" and p.tags == ["kernelbench"]
    level = load_problem(import_module(KB / "level1" / "23_Softmax.py", tmp_path / "q")[0])
    assert level.name == "kernelbench.level1_Softmax" and level.tags == ["kernelbench", "level1"]
    starter = out / "solutions" / "torch_eager.py"
    run = import_file(starter, module_name("_starter_", starter)).run
    x, w, b = torch.rand(4, 16), torch.rand(16, 16), torch.rand(16)
    assert torch.equal(run(x, w, b), load_reference(p)(x, w, b))
    from solbench.worker.candidate import shipped_candidates

    assert shipped_candidates(out) == [starter]  # the module's copy beside it is no candidate
    (out / "problem.yaml").write_text("mine")
    with pytest.raises(ImportRefused, match="--force"):
        import_module(tmp_path / "kb_module.py", out)
    assert (out / "problem.yaml").read_text() == "mine"
    import_module(tmp_path / "kb_module.py", out, force=True)
    assert load_problem(out / "problem.yaml").name == "kernelbench.kb_module"
