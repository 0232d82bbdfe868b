"""Every shipped problem declares a value domain on every input, and its shipped torch_eager candidate
passes the edge rounds at the problem's small shape on the CPU (in-process, judged as the engine
judges: ``tests/edge_check.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from edge_check import edge_rounds, first_failure, run_round

from solbench.data.problem import find_problems, load_problem
from solbench.engine.problem_code import load_module

ROOT = Path(__file__).resolve().parents[2]
PROBLEM_FILES = find_problems(ROOT / "problems")
IDS = [f"{p.parent.parent.name}.{p.parent.name}" for p in PROBLEM_FILES]


def test_every_input_of_every_problem_declares_a_domain_and_cites_its_figures():
    """A domain on every input; max_abs / max_offset with a source (validate refuses them without one)."""
    missing, uncited = [], []
    for p in PROBLEM_FILES:
        problem = load_problem(p)
        for name, spec in problem.inputs.items():
            d = spec.domain
            if d is None:
                missing.append(f"{problem.name}: {name}")
            elif (d.max_abs is not None or d.max_offset is not None) and len(d.source.strip()) < 10:
                uncited.append(f"{problem.name}: {name}")
    assert not missing, "inputs without a domain: " + ", ".join(missing)
    assert not uncited, "figures without a source: " + ", ".join(uncited)


@pytest.mark.slow
@pytest.mark.parametrize("path", PROBLEM_FILES, ids=IDS)
def test_shipped_eager_candidate_passes_the_edge_rounds(path):
    problem = load_problem(path)
    run = load_module(problem.folder / "solutions" / "torch_eager.py", "cand").run
    rounds = edge_rounds(problem)
    ran = [r for r in rounds if r.skipped is None]
    assert ran, f"every edge round skipped: {[(r.name, r.skipped) for r in rounds]}"
    failures = {r.name: why for r in ran if (why := run_round(problem, r, run)) is not None}
    assert not failures, failures


# --- the whole decoder layer: edge rounds within its parts' domains -----------------------------

LAYER = ROOT / "problems" / "llama3_1_8b" / "decoder_layer" / "problem.yaml"
ATTENTION = ROOT / "problems" / "llama3_1_8b" / "attention_decode" / "problem.yaml"


def _roped_q_k(inputs: dict, axes: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's roped queries and new keys, in float32 from HF's formulas (not the problem's reference)."""
    hq, hkv, d = axes["HQ"], axes["HKV"], axes["D"]
    x, eps = inputs["x"].float(), inputs["eps"]
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * inputs["ln1_weight"].float()
    q, k, _ = (normed @ inputs["w_qkv"].float().T).split([hq * d, hkv * d, hkv * d], dim=-1)
    cos, sin = inputs["cos"].float()[None, :, None], inputs["sin"].float()[None, :, None]

    def rope(t: torch.Tensor, heads: int) -> torch.Tensor:
        t = t.reshape(*t.shape[:2], heads, d)
        return t * cos + torch.cat((-t[..., d // 2:], t[..., :d // 2]), dim=-1) * sin

    return rope(q, hq), rope(k, hkv)


def test_decoder_layer_edge_rounds_keep_its_attention_within_the_attention_problems_domains():
    """Every edge round of the whole layer drives its attention no harder than the attention problem
    declares real models do (queries and keys within its max_abs). With every weight and norm gain scaled
    to its per-element bound at once, the queries reached ~250 (logits ~1e4): a near-hard softmax where
    a legitimate bf16 rounding picks another key (the H200's INCORRECT record of 2026-12-02)."""
    layer, attention = load_problem(LAYER), load_problem(ATTENTION)
    q_max, k_max = attention.inputs["q"].domain.max_abs, attention.inputs["k_cache"].domain.max_abs
    checked = []
    for seed in (7, 8, 9):
        for r in edge_rounds(layer, seed):
            if r.skipped is None:
                q_peak, k_peak = (float(t.abs().max()) for t in _roped_q_k(r.inputs, r.axes))
                assert q_peak <= q_max and k_peak <= k_max, (r.name, q_peak, k_peak)
                checked.append(r.name)
    assert any(n.startswith("large") for n in checked), checked


MOE = ROOT / "problems" / "qwen3_30b_a3b" / "moe_experts" / "problem.yaml"
NORM = ROOT / "problems" / "qwen3_30b_a3b" / "rmsnorm" / "problem.yaml"


ROUTER = ROOT / "problems" / "mixtral_8x7b" / "router" / "problem.yaml"
ROUTER_TOPK = ROOT / "problems" / "qwen3_30b_a3b" / "router_topk" / "problem.yaml"


@pytest.mark.parametrize("path", [MOE, ROUTER], ids=["moe_experts", "mixtral_router"])
def test_edge_rounds_keep_a_normed_x_a_possible_rmsnorm_output(path):
    """x is RMSNorm's output h / rms(h) * gain, so every row's rms is at most the largest gain the
    library allows (the rmsnorm problem's weight bound). Scaled so its peak was 1000 (the bound of one
    massive-activation element), every row had rms ~260 (moe_experts) and ~210 (the Mixtral router)."""
    gain_max = load_problem(NORM).inputs["weight"].domain.max_abs
    checked = []
    for r in edge_rounds(load_problem(path)):
        if r.skipped is None:
            rms = float(r.inputs["x"].float().pow(2).mean(-1).sqrt().max())
            assert rms <= gain_max, (r.name, rms)
            checked.append(r.name)
    assert any(n.startswith("large") for n in checked), checked


def test_mixtral_router_edge_rounds_keep_its_logits_within_the_router_logits_bound():
    """The router's logits (x @ weight.T, in float64 here) stay within the bound the library declares
    for router logits (qwen3_30b_a3b.router_topk's input). With x at 1000 and every weight at 4 they
    reached ~5e4, where float32's own rounding of a logit (3e-3) exceeds the rtol (1e-4) that a top-2
    weight's relative error, the error of the logit gap, is held to: the H200's INCORRECT of 2026-12-02."""
    bound = load_problem(ROUTER_TOPK).inputs["logits"].domain.max_abs
    checked = []
    for seed in (7, 35):
        for r in edge_rounds(load_problem(ROUTER), seed):
            if r.skipped is None:
                peak = float((r.inputs["x"].double() @ r.inputs["weight"].double().T).abs().max())
                assert peak <= bound, (r.name, peak)
                checked.append(r.name)
    assert any(n.startswith("large") for n in checked), checked


def _router_in_gpu_order(x: torch.Tensor, weight: torch.Tensor, tile: int = 32) -> torch.Tensor:
    """The Mixtral router with a GPU GEMM's summation order: one float32 accumulator over K tiles."""
    xf, wf = x.float(), weight.float()
    logits = torch.zeros(x.shape[0], weight.shape[0])
    for k in range(0, x.shape[1], tile):
        logits = logits + xf[:, k:k + tile] @ wf[:, k:k + tile].T
    top, ids = logits.softmax(dim=-1).topk(2, dim=-1)
    return torch.zeros_like(logits).scatter_(1, ids, top / top.sum(dim=-1, keepdim=True))


@pytest.mark.slow
def test_mixtral_router_float32_gemms_pass_the_edge_rounds_on_120_draws():
    """The large round fails a float32 GEMM only on a draw with a near-tie row (top-2 logits within ~10
    of each other at logits ~1e4): as shipped, of seeds 0-119 torch_eager failed 35, 82 and 109 on the
    CPU, the GPU-order GEMM 35 and 48."""
    problem = load_problem(ROUTER)
    eager = load_module(problem.folder / "solutions" / "torch_eager.py", "cand").run
    failures = {(name, seed): why for seed in range(120) for name, run in (("eager", eager), ("gpu_order", _router_in_gpu_order))
                if (why := first_failure(problem, run, seed)) is not None}
    assert not failures, failures


@pytest.mark.slow
@pytest.mark.parametrize("path", [LAYER, MOE], ids=["decoder_layer", "moe_experts"])
def test_chained_problems_eager_candidate_passes_the_edge_rounds_on_twenty_draws(path):
    """One draw (above, seed 7) passed by luck before these layers' domains were fixed: of seeds 0-19,
    the decoder layer failed the large round on the CPU in 3 (as the H200 run did), the MoE experts in
    3 of seeds 0-9."""
    problem = load_problem(path)
    run = load_module(problem.folder / "solutions" / "torch_eager.py", "cand").run
    failures = {seed: why for seed in range(20) if (why := first_failure(problem, run, seed)) is not None}
    assert not failures, failures
