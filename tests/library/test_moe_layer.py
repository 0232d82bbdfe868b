"""The Qwen3-30B-A3B problems cover one full MoE decoder layer.

Checked independently of the problems' references: every op of the layer is a problem with
``runs_per_layer``; the layer's matmul FLOPs (sum of formulas x runs_per_layer) equal what
FlopCounterMode counts on a separately written decoder layer (per-row causal attention, per-token
expert loop, separate q/k/v projections); the weight shapes add up to the published 30.5B total /
3.3B active parameters; and the MoE bytes formula's expected distinct-expert count matches the
routing the input generator draws.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from solbench.data.problem import Problem, find_problems, load_problem
from solbench.data.rollup import in_phase, layer_problems
from solbench.engine.problem_code import load_generator

FAMILY_DIR = Path(__file__).resolve().parents[2] / "problems" / "qwen3_30b_a3b"
MODEL_ID = "Qwen/Qwen3-30B-A3B"
# Published config.json of Qwen/Qwen3-30B-A3B.
CONFIG = {"H": 2048, "HQ": 32, "HKV": 4, "D": 128, "F": 768, "E": 128, "K": 8}
NUM_LAYERS, VOCAB = 48, 151936
# One decoder layer, in the library's decomposition (residual adds fused into o_proj and the MoE
# combine): op -> times it runs per layer. Attention is prefill or decode depending on the phase.
LAYER_OPS = {
    "rmsnorm": 2, "qkv_proj": 1, "qk_norm_rope": 1, "kv_cache_append": 1, "attention_prefill": 1,
    "attention_decode": 1, "o_proj_residual": 1, "router_gate": 1, "router_topk": 1, "moe_experts": 1,
}
MATMUL_TAGS = {"gemm", "attention"}


@pytest.fixture(scope="module")
def layer() -> dict[str, Problem]:
    problems = (load_problem(p) for p in find_problems(FAMILY_DIR))
    # The family also holds stand-alone problems (moe_grouped_gemm): the layer is the tagged ops.
    return {p.folder.name: p for p in problems if "decoder-layer" in p.tags}


def _axes(problem: Problem, dims: dict[str, int]) -> dict[str, int]:
    """Resolve a problem's axes with every const/var axis it shares with ``dims`` set from it."""
    var = {a: dims[a] for a in problem.var_axes}
    consts = {a: dims[a] for a, ax in problem.axes.items() if ax.type == "const" and a in dims}
    unset = {a for a, ax in problem.axes.items() if ax.type == "const"} - consts.keys() - {"SLOTS"}
    assert not unset, f"{problem.name}: const axes {unset} are not model dimensions this test knows"
    return problem.resolve_axes(var, overrides=consts)


def test_every_op_of_the_layer_is_a_problem(layer):
    assert set(layer) == set(LAYER_OPS)
    assert [p.name for p in layer_problems(FAMILY_DIR, "qwen3_30b_a3b")] == sorted(p.name for p in layer.values())
    for name, p in layer.items():
        assert p.name == f"qwen3_30b_a3b.{name}"
        assert p.source.model == MODEL_ID
        assert "decoder-layer" in p.tags, name
        assert p.runs_per_layer == LAYER_OPS[name], name
        for axis, value in CONFIG.items():
            if axis in p.axes and p.axes[axis].type == "const":
                assert p.axes[axis].value == value, f"{name}: {axis}"


# --- an independent decoder layer ------------------------------------------------------------

def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _attend_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first_pos: int) -> torch.Tensor:
    """q [Sq, HQ, D] against k/v [Sk, HKV, D]; query i sees keys 0..first_pos+i (exact causal count)."""
    group = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    for i in range(q.shape[0]):
        n = first_pos + i + 1
        for h in range(q.shape[1]):
            kh, vh = k[:n, h // group], v[:n, h // group]
            out[i, h] = (torch.softmax(q[i, h, None] @ kh.t() / math.sqrt(q.shape[2]), dim=-1) @ vh)[0]
    return out


def _qwen3_moe_layer(x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None, w: dict, d: dict) -> torch.Tensor:
    """x [S, H] of one sequence; cache = earlier keys/values (decode) or None (prefill)."""
    h = _rms(x, w["ln1"])
    q = (h @ w["q"].t()).view(-1, d["HQ"], d["D"])
    k = (h @ w["k"].t()).view(-1, d["HKV"], d["D"])
    v = (h @ w["v"].t()).view(-1, d["HKV"], d["D"])
    q, k = _rms(q, w["qn"]), _rms(k, w["kn"])  # RoPE is elementwise: no matmul FLOPs
    first = 0
    if cache is not None:
        first = cache[0].shape[0]
        k, v = torch.cat([cache[0], k]), torch.cat([cache[1], v])
    x = x + _attend_rows(q, k, v, first).reshape(x.shape[0], -1) @ w["o"].t()
    h = _rms(x, w["ln2"])
    probs = torch.softmax(h @ w["router"].t(), dim=-1)
    top_w, top_i = probs.topk(d["K"], dim=-1)
    top_w = top_w / top_w.sum(-1, keepdim=True)
    moe = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(d["K"]):
            e = int(top_i[t, j])
            ht = h[t, None]  # [1, H]: 2-D matmuls, as FlopCounterMode counts mm (not mv)
            act = F.silu(ht @ w["gate_proj"][e].t()) * (ht @ w["up_proj"][e].t())
            moe[t] += top_w[t, j] * (act @ w["down_proj"][e].t())[0]
    return x + moe


def _layer_weights(d: dict[str, int]) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    shapes = {
        "ln1": (d["H"],), "ln2": (d["H"],), "qn": (d["D"],), "kn": (d["D"],),
        "q": (d["HQ"] * d["D"], d["H"]), "k": (d["HKV"] * d["D"], d["H"]), "v": (d["HKV"] * d["D"], d["H"]),
        "o": (d["H"], d["HQ"] * d["D"]), "router": (d["E"], d["H"]),
        "gate_proj": (d["E"], d["F"], d["H"]), "up_proj": (d["E"], d["F"], d["H"]), "down_proj": (d["E"], d["H"], d["F"]),
    }
    return {n: torch.randn(s, generator=g) * 0.1 for n, s in shapes.items()}


SMALL = {"H": 48, "HQ": 4, "HKV": 2, "D": 8, "F": 24, "E": 8, "K": 3}


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_layer_matmul_flops_match_an_independent_layer(layer, phase):
    from torch.utils.flop_counter import FlopCounterMode

    d = dict(SMALL)
    w = _layer_weights(d)
    g = torch.Generator().manual_seed(1)
    if phase == "prefill":
        d.update(B=2, S=5, T=10)
        seqs = [(torch.randn(d["S"], d["H"], generator=g), None) for _ in range(d["B"])]
    else:
        d.update(B=3, L=7, T=3)  # the cache holds L-1 earlier tokens; the new one makes L
        seqs = [(torch.randn(1, d["H"], generator=g),
                 (torch.randn(d["L"] - 1, d["HKV"], d["D"], generator=g),
                  torch.randn(d["L"] - 1, d["HKV"], d["D"], generator=g))) for _ in range(d["B"])]
    with FlopCounterMode(display=False) as counter:
        for x, cache in seqs:
            _qwen3_moe_layer(x, cache, w, d)
    declared = sum(p.flops_for(_axes(p, d)) * p.runs_per_layer
                   for p in layer.values() if in_phase(p, phase) and MATMUL_TAGS & set(p.tags))
    assert declared == counter.get_total_flops()


def test_weights_add_up_to_the_published_parameter_counts(layer):
    """30.5B parameters in total, 3.3B activated (Qwen3-30B-A3B model card)."""
    weights = {  # problem -> its inputs that are parameters
        "rmsnorm": ["weight"], "qkv_proj": ["weight"], "qk_norm_rope": ["q_norm_weight", "k_norm_weight"],
        "o_proj_residual": ["weight"], "router_gate": ["weight"], "moe_experts": ["w13", "w2"],
    }
    per_layer = active = 0
    for name, inputs in weights.items():
        p = layer[name]
        axes = _axes(p, {**CONFIG, "T": 1})
        for i in inputs:
            n = math.prod(p.shape(i, axes)) * p.runs_per_layer
            per_layer += n
            active += n * CONFIG["K"] // CONFIG["E"] if name == "moe_experts" else n
    embeddings = 2 * VOCAB * CONFIG["H"]  # embed_tokens and the untied lm_head
    assert NUM_LAYERS * per_layer + embeddings == pytest.approx(30.5e9, rel=0.01)
    assert NUM_LAYERS * active + embeddings == pytest.approx(3.3e9, rel=0.03)


def test_moe_bytes_count_the_experts_the_generator_touches(layer):
    """The bytes formula's E*(1-(1-K/E)**T) is the mean number of distinct experts in generated routings."""
    p = layer["moe_experts"]
    gen = load_generator(p)
    expert_bytes = 3 * CONFIG["H"] * CONFIG["F"] * 2
    for t in (1, 4, 16):
        axes = _axes(p, {**CONFIG, "T": t, "H": 8, "F": 4})  # only the routing matters here
        counts = []
        for seed in range(100):
            ids = gen(axes, torch.Generator().manual_seed(seed), "cpu")["topk_ids"]
            assert (ids.sort(dim=1).values.diff(dim=1) != 0).all(), "experts per token must be distinct"
            counts.append(ids.unique().numel())
        expected = CONFIG["E"] * (1 - (1 - CONFIG["K"] / CONFIG["E"]) ** t)
        assert sum(counts) / len(counts) == pytest.approx(expected, rel=0.03)
        full = _axes(p, {**CONFIG, "T": t})
        activations = 3 * t * CONFIG["H"] * 2 + t * CONFIG["K"] * 8
        assert p.bytes_for(full) == pytest.approx(activations + expected * expert_bytes, abs=1)
    big = _axes(p, {**CONFIG, "T": 16384})
    assert p.bytes_for(big) - 3 * 16384 * CONFIG["H"] * 2 - 16384 * CONFIG["K"] * 8 == pytest.approx(
        CONFIG["E"] * expert_bytes, rel=1e-6)


# --- plausible wrong kernels fail the tolerance --------------------------------------------------

def _interleaved_rope(i: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-J pairing (adjacent dims) instead of Qwen's rotate-half."""
    def one(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = _rms(x.float(), w.float())
        x1, x2, c, s = xf[..., 0::2], xf[..., 1::2], i["cos"][:, None], i["sin"][:, None]
        return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).flatten(-2).to(x.dtype)
    return one(i["q"], i["q_norm_weight"]), one(i["k"], i["k_norm_weight"])


def _swap_halves(w13: torch.Tensor) -> torch.Tensor:
    return torch.cat(w13.chunk(2, dim=1)[::-1], dim=1)


WRONG = {
    "rope interleaved": ("qk_norm_rope", lambda ref, i: _interleaved_rope(i)),
    "top-k not renormalised": ("router_topk", lambda ref, i: (lambda w, e: (w, e.int()))(
        *i["logits"].softmax(-1).topk(CONFIG["K"], -1))),
    "gate and up swapped": ("moe_experts", lambda ref, i: ref(**{**i, "w13": _swap_halves(i["w13"])})),
    "combine weights ignored": ("moe_experts", lambda ref, i: ref(
        **{**i, "topk_weights": torch.full_like(i["topk_weights"], 1 / i["topk_weights"].shape[1])})),
    "residual dropped": ("moe_experts", lambda ref, i: ref(**{**i, "residual": torch.zeros_like(i["residual"])})),
    "kv heads mis-grouped": ("attention_decode", lambda ref, i: ref(
        i["q"], i["k_cache"].roll(1, 2), i["v_cache"].roll(1, 2))),
}


@pytest.mark.parametrize("case", WRONG)
def test_wrong_kernels_fail(layer, case):
    from solbench.engine.problem_code import load_reference, make_inputs

    op, wrong = WRONG[case]
    p = layer[op]
    ref = load_reference(p)
    inputs = make_inputs(p, p.test_axes_resolved(), seed=7)
    expected, got = ref(**inputs), wrong(ref, inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    tol = p.tolerance

    def fails(out: torch.Tensor, exp: torch.Tensor) -> bool:
        if not exp.dtype.is_floating_point:
            return not torch.equal(out, exp)
        bad = (out.double() - exp.double()).abs() > tol.atol + tol.rtol * exp.double().abs()
        return bad.double().mean().item() > tol.max_mismatch_ratio

    assert any(fails(o, e) for o, e in zip(got, expected, strict=True)), f"{case}: passes {p.name}'s tolerance"


def test_deep_validation_counts_the_routed_experts(layer):
    """MoE references cannot run on meta tensors; validate --deep counts them on the CPU instead."""
    from solbench.engine.problem_code import deep_check

    assert deep_check(layer["moe_experts"]) == []
