"""Edge rounds: value domains checked, rounds built from them, numerically careless kernels caught.

The done-when cases of the edge rounds: a softmax without the max subtraction and a one-pass-variance
LayerNorm pass the typical rounds and fail an edge round that the reason names (through the real
runner, and in-process for variants); a kernel that assumes contiguous inputs fails the layout
rounds where they are legal; the shipped eager candidates pass (tests/library/test_edge_rounds.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from edge_check import edge_rounds, first_failure, run_round

from solbench import api
from solbench.data.domain import Domain, apply_layout, domain_errors, effective_domain, layout_spec, physical
from solbench.data.problem import load_problem, problem_from_dict
from solbench.data.record import ResultRecord, Status
from solbench.errors import ProblemError

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "problems" / "bert_base" / "attn_softmax_mask"
LAYERNORM = ROOT / "problems" / "bert_base" / "residual_layernorm"


# --- candidates that pass typical inputs and break at the edges --------------------------------

def naive_softmax(scores, mask, scale):
    e = torch.exp(scores.float() * scale) * mask[:, None, None, :]
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def online_softmax_zero_init(scores, mask, scale):
    """Online softmax over key blocks whose running max starts at 0 instead of -inf."""
    x = (scores.float() * scale).masked_fill(~mask[:, None, None, :], -math.inf)
    m = torch.zeros(x.shape[:-1] + (1,))
    s = torch.zeros_like(m)
    for block in x.split(8, dim=-1):
        m_new = torch.maximum(m, block.amax(-1, keepdim=True))
        s = s * torch.exp(m - m_new) + torch.exp(block - m_new).sum(-1, keepdim=True)
        m = m_new
    return (torch.exp(x - m) / s).to(scores.dtype)


def onepass_layernorm(x, residual, weight, bias, eps):
    h = x.float() + residual.float()
    mean = h.mean(-1, keepdim=True)
    var = (h * h).mean(-1, keepdim=True) - mean * mean
    return ((h - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)


def _typical_pass(problem, run) -> None:
    """The kernel passes the problem's typical inputs (else the edge rounds would prove nothing)."""
    from solbench.engine.correctness import compare_tensors
    from solbench.engine.problem_code import load_generator, load_reference, make_inputs

    axes = problem.test_axes_resolved()
    inputs = make_inputs(problem, axes, 3, generator_fn=load_generator(problem))
    want = load_reference(problem)(*[v.clone() if hasattr(v, "clone") else v for v in inputs.values()])
    got = run(*inputs.values())
    assert compare_tensors(got, want, problem.tolerance.atol, problem.tolerance.rtol).passed


@pytest.mark.parametrize("run, problem_dir, round_prefix", [
    (naive_softmax, SOFTMAX, ("large", "offset")),
    (online_softmax_zero_init, SOFTMAX, ("offset -",)),
    (onepass_layernorm, LAYERNORM, ("offset",)),
])
def test_careless_kernels_pass_typical_inputs_and_fail_an_edge_round(run, problem_dir, round_prefix):
    problem = load_problem(problem_dir)
    _typical_pass(problem, run)
    failed = first_failure(problem, run)
    assert failed is not None and failed[0].startswith(round_prefix), failed


def naive_cross_entropy(logits, targets):
    """log-sum-exp without the max subtraction."""
    lf = logits.float()
    return torch.log(torch.exp(lf).sum(-1)) - lf.gather(1, targets[:, None])[:, 0]


def onepass_vit_layernorm(x, weight, bias, eps):
    h = x.float()
    mean = h.mean(-1, keepdim=True)
    var = (h * h).mean(-1, keepdim=True) - mean * mean
    return ((h - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)


def onepass_adaln(x, shift, scale, eps):
    h = x.float()
    mean = h.mean(-1, keepdim=True)
    var = (h * h).mean(-1, keepdim=True) - mean * mean
    normed = (h - mean) * torch.rsqrt(var + eps)
    return (normed * (1 + scale.float()[:, None, :]) + shift.float()[:, None, :]).to(x.dtype)


def fp16_squares_rmsnorm(x, weight, eps):
    h = x.half()
    return (h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * weight.half()).to(x.dtype)


def online_decode_zero_init(q, k_cache, v_cache):
    """Flash-decoding over key blocks whose running max starts at 0 instead of -inf."""
    b, hq, d = q.shape
    group = hq // k_cache.shape[2]
    k, v = k_cache.float().repeat_interleave(group, dim=2), v_cache.float().repeat_interleave(group, dim=2)
    s = torch.einsum("bhd,blhd->bhl", q.float(), k) / math.sqrt(d)
    m, total, acc = torch.zeros(b, hq, 1), torch.zeros(b, hq, 1), torch.zeros(b, hq, d)
    for start in range(0, s.shape[-1], 256):
        block = s[..., start:start + 256]
        m_new = torch.maximum(m, block.amax(-1, keepdim=True))
        p, c = torch.exp(block - m_new), torch.exp(m - m_new)
        total = total * c + p.sum(-1, keepdim=True)
        acc = acc * c + torch.einsum("bhl,blhd->bhd", p, v[:, start:start + 256])
        m = m_new
    return (acc / total).to(q.dtype)


@pytest.mark.slow
@pytest.mark.parametrize("run, problem, round_prefix", [
    (naive_cross_entropy, "llama3_1_8b/cross_entropy", ("large", "offset")),
    (onepass_vit_layernorm, "vit_l16/layernorm", ("offset",)),
    (onepass_adaln, "flux1_dev/adaln_modulate", ("offset",)),
    (fp16_squares_rmsnorm, "llama3_1_8b/rmsnorm", ("large",)),
    (online_decode_zero_init, "llama3_1_8b/attention_decode", ("offset",)),
])
@pytest.mark.parametrize("seed", [7, 8])
def test_the_same_kinds_of_kernel_fail_on_other_problems(run, problem, round_prefix, seed):
    """Variants on other problems (a log-sum-exp without the max, one-pass variances, float16 squares, a
    zero-initialised running max), on two seeds: the rounds catch the kind, not one draw."""
    problem = load_problem(ROOT / "problems" / problem)
    _typical_pass(problem, run)
    failed = first_failure(problem, run, seed)
    assert failed is not None and failed[0].startswith(round_prefix), failed


def test_shipped_eager_candidates_of_those_problems_pass():
    from solbench.engine.problem_code import load_module

    for folder in (SOFTMAX, LAYERNORM):
        run = load_module(folder / "solutions" / "torch_eager.py", "cand").run
        assert first_failure(load_problem(folder), run) is None


@pytest.mark.slow
def test_through_the_runner_the_record_names_the_round(tmp_path):
    """The real path (worker, wire, parent's checks): INCORRECT with `edge round '...'` in the reason,
    and the record's typed `correctness.edge` lists what ran; the shipped eager candidate passes."""
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "naive.py").write_text(
        "import torch\n\ndef run(scores, mask, scale):\n"
        "    e = torch.exp(scores.float() * scale) * mask[:, None, None, :]\n"
        "    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)\n")
    result = api.run_problems([SOFTMAX], [cands / "naive.py", SOFTMAX / "solutions" / "torch_eager.py"],
                              device="cpu", small=True, budget_s=0.05, output=tmp_path / "r.jsonl", seed=5,
                              guards=False)  # the engine's checks alone: a loaded CPU cannot sway the guards' verdict
    naive, eager = result.records
    assert naive.status == Status.INCORRECT.value, naive.reason
    assert naive.reason.startswith("edge round 'offset") or naive.reason.startswith("edge round 'large"), naive.reason
    edge = naive.correctness["edge"]
    assert len(edge["failed"]) == 1 and naive.reason.startswith(f"edge round {edge['failed'][0]['name']!r}")
    assert eager.status == Status.PASSED.value, eager.reason
    names = [e["name"] for e in eager.correctness["edge"]["run"]]
    assert {"large 800", "zeros"} <= set(names) and any(n.startswith("offset") for n in names)
    assert eager.harness["edge_s"] > 0


# --- domains ----------------------------------------------------------------------------------

def test_defaults_follow_the_dtype():
    d = effective_domain(None, "bfloat16")
    assert (d.role, d.max_abs, d.tiny, d.zeros, d.max_offset) == ("value", 1.0e4, 1.0e-15, True, None)
    assert effective_domain(None, "float8_e4m3fn").max_abs == 448.0
    assert effective_domain(None, "float8_e5m2").max_abs == 57344.0
    assert effective_domain(None, "int32").role == "index"
    assert effective_domain(None, "bool").role == "index"
    assert effective_domain(None, "float32", is_scalar=True).role == "fixed"
    assert effective_domain(Domain(max_abs=5, source="x"), "float16").max_abs == 5


@pytest.mark.parametrize("domain, dtype, rank, expected", [
    (Domain(role="value"), "int32", 1, "'value' needs a float tensor"),
    (Domain(role="value"), "float32", None, "'value' needs a float tensor"),
    (Domain(max_abs=3), "int64", 2, "max_abs: only a 'value' input"),
    (Domain(role="fixed", layouts=["strided"]), "bfloat16", 2, "layouts: only a 'value' input"),
    (Domain(max_abs=1e6, source="s"), "float16", 2, "beyond float16's largest finite value"),
    (Domain(max_abs=500, source="s"), "float8_e4m3fn", 2, "beyond float8_e4m3fn's largest"),
    (Domain(tiny=1e-40), "bfloat16", 2, "tiny: 1e-40 must be a normal bfloat16 value"),
    (Domain(tiny=1e-6), "float16", 2, "tiny: 1e-06 must be a normal float16 value"),
    (Domain(max_abs=10, tiny=20.0, source="s"), "float32", 2, "below max_abs"),
    (Domain(layouts=["permuted"]), "float32", 1, "permuted needs 2 or more dims"),
    (Domain(max_abs=10), "float32", 2, "source: say where"),
    (Domain(max_offset=0, source="s"), "float32", 2, "max_offset: 0 gives no offset round"),
    (Domain(scale=4, max_abs=2, source="s"), "float32", 2, "below the typical scale"),
    (Domain(specials=["nan", "nan"]), "float32", 2, "specials: listed twice"),
])
def test_domain_errors_name_the_key_and_the_fix(domain, dtype, rank, expected):
    errs = domain_errors("inputs.x.domain", domain, dtype, rank)
    assert any(expected in e for e in errs), errs
    assert all(e.startswith("inputs.x.domain") for e in errs)


def test_good_domains_have_no_errors():
    assert domain_errors("w", Domain(max_abs=448, tiny=0.0625, source="OCP FP8"), "float8_e4m3fn", 2) == []
    assert domain_errors("w", Domain(role="index"), "int32", 1) == []
    assert domain_errors("w", Domain(role="fixed"), "float32", None) == []
    assert domain_errors("w", Domain(tiny=False, zeros=False, layouts=["permuted", "strided"]), "bfloat16", 3) == []


def _tiny_problem(**domains) -> dict:
    return {
        "name": "t.edge", "description": "d", "source": {"model": "none"},
        "axes": {"N": {"type": "var"}, "D": {"type": "const", "value": 16}},
        "inputs": {"x": {"shape": ["N", "D"], "dtype": "float32", **({"domain": domains["x"]} if "x" in domains else {})},
                   "i": {"shape": ["N"], "dtype": "int64", **({"domain": domains["i"]} if "i" in domains else {})}},
        "outputs": {"out": {"shape": ["N", "D"], "dtype": "float32"}},
        "reference": "reference.py:run", "flops": "N * D", "bytes": "auto", "compute_dtype": "float32",
        "tolerance": {"atol": 1e-5, "rtol": 1e-5}, "workloads": [{"name": "n4", "axes": {"N": 4}}],
    }


def _write(tmp_path: Path, data: dict, body: str) -> Path:
    import yaml

    (tmp_path / "reference.py").write_text(f"import torch\n\ndef run(x, i):\n    {body}\n")
    (tmp_path / "problem.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path / "problem.yaml"


def test_the_problem_loader_reports_a_bad_domain_in_one_line(tmp_path):
    path = _write(tmp_path, _tiny_problem(i={"max_abs": 3}), "return x")
    with pytest.raises(ProblemError) as err:
        load_problem(path)
    assert any("inputs.i.domain.max_abs: only a 'value' input" in e for e in err.value.errors)
    with pytest.raises(ProblemError) as err:
        problem_from_dict({**_tiny_problem(), "outputs": {"out": {"shape": ["N", "D"], "dtype": "float32",
                                                                  "domain": {"zeros": False}}}}, path)
    assert any("outputs.out.domain: only inputs" in e for e in err.value.errors)


def test_the_schema_documents_the_domain():
    from solbench.data.problem import problem_json_schema

    schema = problem_json_schema()
    props = schema["$defs"]["Domain"]["properties"]
    assert {"role", "scale", "offset", "max_abs", "max_offset", "tiny", "zeros", "specials", "layouts",
            "source"} <= set(props)
    assert all(p.get("description") for p in props.values())


# --- the rounds --------------------------------------------------------------------------------

def test_rounds_follow_the_domain_and_leave_index_inputs_alone(tmp_path):
    data = _tiny_problem(x={"max_abs": 100, "max_offset": -50, "source": "t", "tiny": 1e-10,
                            "layouts": ["permuted", "strided", "broadcast"], "specials": ["nan"]})
    data["tags"] = ["norm"]  # a norm's offset rounds run on three typical cases
    path = _write(tmp_path, data, "return x * 2 + i[:, None] * 1e-3")
    problem = load_problem(path)
    rounds = {r.name: r for r in edge_rounds(problem)}
    assert list(rounds) == ["large 100", "offset -50", "offset 50", "tiny 1e-10", "zeros", "specials nan",
                            "permuted", "strided", "broadcast", "offset -50 (draw 2)", "offset 50 (draw 2)",
                            "offset -50 (draw 3)", "offset 50 (draw 3)"]
    assert not torch.equal(rounds["offset 50 (draw 2)"].inputs["x"], rounds["offset 50"].inputs["x"])
    base_i = rounds["permuted"].inputs["i"]
    for r in rounds.values():  # the draws are other typical cases: their own index inputs
        assert "(draw" in r.name or torch.equal(r.inputs["i"], base_i), f"{r.name} changed an index input"
    x = rounds["large 100"].inputs["x"]
    assert float(x.abs().max()) == pytest.approx(100, rel=1e-6)
    assert float(rounds["tiny 1e-10"].inputs["x"].abs().max()) == pytest.approx(1e-10, rel=1e-6)
    assert torch.allclose(rounds["offset -50"].inputs["x"] + 100, rounds["offset 50"].inputs["x"])
    zeros = rounds["zeros"].inputs["x"]
    assert bool((zeros[0::2] == 0).all()) and bool((zeros[1::2] != 0).any())
    assert int(rounds["specials nan"].inputs["x"].isnan().sum()) >= 1
    assert rounds["specials nan"].expected["out"].isnan().any()  # the reference keeps the NaN: it counts
    # atol scales with the output: the large round's reference is ~100/|typical max| times bigger.
    assert rounds["large 100"].atol["out"] > 10 * problem.tolerance.atol


def test_a_round_the_reference_overflows_on_is_skipped_and_says_so(tmp_path):
    path = _write(tmp_path, _tiny_problem(x={"max_abs": 1000, "source": "t"}), "return torch.exp(x) + i[:, None]")
    rounds = {r.name: r for r in edge_rounds(load_problem(path))}
    assert "overflows" in rounds["large 1000"].skipped and "float32" in rounds["large 1000"].skipped
    assert rounds["zeros"].skipped is None


def test_a_round_the_reference_underflows_on_is_skipped(tmp_path):
    path = _write(tmp_path, _tiny_problem(x={"tiny": 1e-30}), "return x * x * x + 0 * i[:, None]")
    rounds = {r.name: r for r in edge_rounds(load_problem(path))}
    assert "underflows to zero" in rounds["tiny 1e-30"].skipped


@pytest.mark.parametrize("kind", ["permuted", "strided", "broadcast"])
def test_layouts_rebuild_the_same_values_non_contiguously(kind):
    x = torch.randn(3, 5, 4)
    if kind == "broadcast":
        x = x[:1].expand(3, 5, 4).contiguous()
    spec = layout_spec(kind, x)
    buf = physical(x, spec)
    assert buf.is_contiguous()
    view = apply_layout(buf, spec)
    assert torch.equal(view, x) and not view.is_contiguous()
    if kind == "strided":
        assert buf[..., 4:].isnan().all()  # what a kernel reading past the row end gets


def _contiguity_assuming(x, i):
    """Reads x's storage as if it were contiguous (what a kernel indexing by row * D does)."""
    flat = torch.as_strided(x, x.shape, (x.shape[1], 1))
    return flat * 2 + i[:, None]


def test_a_kernel_that_assumes_contiguity_fails_where_layouts_are_legal(tmp_path):
    path = _write(tmp_path, _tiny_problem(x={"layouts": ["strided"]}), "return x * 2 + i[:, None]")
    problem = load_problem(path)
    assert first_failure(problem, _contiguity_assuming)[0] == "strided"
    assert first_failure(problem, lambda x, i: x * 2 + i[:, None]) is None
    path = _write(tmp_path, _tiny_problem(), "return x * 2 + i[:, None]")
    assert first_failure(load_problem(path), _contiguity_assuming) is None  # contiguous only: not tested


def test_fp16_accumulation_overflows_at_large_magnitudes(tmp_path):
    """A bf16 GEMM that accumulates in float16 passes typical inputs and fails 'large' (products of
    activations near 3e3 and weights near 10 sum past float16's 65504; bf16 holds the result)."""
    import yaml

    data = {"name": "t.gemm", "description": "d", "source": {"model": "none"},
            "axes": {"N": {"type": "var"}, "K": {"type": "const", "value": 256}, "M": {"type": "const", "value": 32}},
            "inputs": {"x": {"shape": ["N", "K"], "dtype": "bfloat16", "domain": {"max_abs": 3000, "source": "s"}},
                       "w": {"shape": ["M", "K"], "dtype": "bfloat16", "domain": {"max_abs": 10, "source": "s"}}},
            "outputs": {"out": {"shape": ["N", "M"], "dtype": "bfloat16"}},
            "reference": "reference.py:run", "flops": "2 * N * K * M", "bytes": "auto", "compute_dtype": "bfloat16",
            "tolerance": {"atol": 1e-2, "rtol": 2e-2}, "workloads": [{"name": "n8", "axes": {"N": 8}}]}
    (tmp_path / "reference.py").write_text("import torch\n\ndef run(x, w):\n"
                                           "    return (x.float() @ w.float().t()).to(x.dtype)\n")
    (tmp_path / "problem.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    problem = load_problem(tmp_path / "problem.yaml")

    def fp16_gemm(x, w):
        return (x.half() @ w.half().t()).to(x.dtype)

    _typical_pass(problem, fp16_gemm)
    failed = first_failure(problem, fp16_gemm)
    assert failed is not None and failed[0].startswith("large") and "NaN/Inf" in failed[1], failed


def test_an_exception_on_a_legal_layout_fails_the_round(tmp_path):
    path = _write(tmp_path, _tiny_problem(x={"layouts": ["permuted"]}), "return x * 2 + i[:, None]")
    problem = load_problem(path)
    r = next(r for r in edge_rounds(problem) if r.name == "permuted")
    assert "raised RuntimeError" in run_round(problem, r, lambda x, i: x.view(-1).view(x.shape) * 2 + i[:, None])


def _record(correctness: dict) -> ResultRecord:
    return ResultRecord(problem="p.q", workload="w", solution="s", status="INCORRECT", device="cpu", gpu_spec=None,
                        time_s=None, sol=None, flops=1, bytes=1, t_ideal_s=1e-9, bound="memory",
                        timestamp="2026-12-02T00:00:00+00:00", solbench_version="0", correctness=correctness,
                        reason="wrong")


def test_the_record_types_its_edge_report():
    entry = {"name": "zeros", "shape": "small", "axes": {"N": 2}, "reason": None}
    rec = _record({"edge": {"run": [entry], "skipped": [], "failed": []}})
    assert rec.correctness["edge"]["run"] == [entry]
    with pytest.raises(ValueError, match="name"):
        _record({"edge": {"run": [{"shape": "small"}]}})  # a round without a name
    with pytest.raises(ValueError, match="extra"):
        _record({"edge": {"run": [entry | {"note": "x"}]}})  # a key the record does not declare
    assert _record({"rounds": []}).correctness == {"rounds": []}  # records of older runs load as they are


@pytest.mark.slow
def test_a_candidate_that_plans_in_setup_sees_setup_again_at_the_edge_shape(tmp_path):
    """setup(...) may plan for the workload's shapes (docs/engine.md): before the edge rounds at another
    shape it runs again, on a setup case of that shape, so a planning candidate is judged, not tripped."""
    cand = tmp_path / "planned.py"
    cand.write_text("PLAN = {}\n\ndef setup(x, y):\n    PLAN['shape'] = tuple(x.shape)\n\n"
                    "def run(x, y):\n    if tuple(x.shape) != PLAN.get('shape'):\n"
                    "        raise RuntimeError('not planned for this shape')\n    return x * 2 + y\n")
    fixture = ROOT / "tests" / "fixtures" / "tiny" / "scaled_add"
    result = api.run_problems([fixture], [cand], device="cpu", workloads=["n32"], budget_s=0.05, seed=3,
                              output=tmp_path / "r.jsonl", guards=False)
    (record,) = result.records
    assert record.status == Status.PASSED.value, record.reason
    assert {e["shape"] for e in record.correctness["edge"]["run"]} == {"small"}
    assert record.correctness["edge"]["run"][0]["axes"]["N"] == 4  # the smallest workload's shape, not n32's
