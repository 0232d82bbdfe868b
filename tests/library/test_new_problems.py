"""References and eager candidates of the newer problems against independent computations, where the shipped
test shapes alone would not reach what makes the op (chunk boundaries, FP4 codes, sinks, group masks)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2] / "problems"


def _load(rel: str):
    spec = importlib.util.spec_from_file_location(rel.replace("/", "_").removesuffix(".py"), ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _masked_attention(q, k, v, allowed, scale, sinks=None):
    """Naive float64 attention: q [S, H, D], k/v [S, HKV, D], allowed [S, S] bool; optional sink logit per head."""
    group = q.shape[1] // k.shape[1]
    kk, vv = k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    scores = torch.einsum("ihd,jhd->hij", q.double(), kk) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is not None:
        sink = sinks.double().view(-1, 1, 1).expand(-1, q.shape[0], 1)
        probs = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]
    else:
        probs = scores.softmax(-1)
    return torch.einsum("hij,jhd->ihd", probs, vv)


def _qkv(s, hq, hkv, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, s, h, d, generator=g).to(torch.bfloat16) for h in (hq, hkv, hkv)]


def test_llama4_chunked_attention_respects_chunk_boundaries():
    q, k, v = _qkv(224, 10, 2, 32)
    i, j = torch.arange(224)[:, None], torch.arange(224)[None, :]
    allowed = (j <= i) & (j // 64 == i // 64)
    expected = _masked_attention(q[0], k[0], v[0], allowed, 32**-0.5)
    for rel in ("llama4_scout/chunked_attention_prefill/reference.py",
                "llama4_scout/chunked_attention_prefill/solutions/torch_eager.py"):
        got = _load(rel).run(q, k, v, 64)[0].double()
        assert (got - expected).abs().max() < 2e-2, rel
    plain = _masked_attention(q[0], k[0], v[0], j <= i, 32**-0.5)
    assert (plain - expected).abs().max() > 0.1  # the chunk mask changes the answer: the check above can fail


def test_gemma3_band_attention_matches_a_naive_band():
    q, k, v = _qkv(300, 4, 2, 32, seed=1)
    i, j = torch.arange(300)[:, None], torch.arange(300)[None, :]
    expected = _masked_attention(q[0], k[0], v[0], (j <= i) & (j > i - 96), 168**-0.5)
    for rel in ("gemma3_27b/sliding_window_attention_prefill/reference.py",
                "gemma3_27b/sliding_window_attention_prefill/solutions/torch_eager.py"):
        got = _load(rel).run(q, k, v, 96)[0].double()
        assert (got - expected).abs().max() < 2e-2, rel


def test_gpt_oss_sinks_take_probability_mass():
    q, k, v = _qkv(96, 16, 2, 64, seed=2)
    sinks = (torch.randn(16, generator=torch.Generator().manual_seed(3)) + 2).to(torch.bfloat16)
    i, j = torch.arange(96)[:, None], torch.arange(96)[None, :]
    expected = _masked_attention(q[0], k[0], v[0], j <= i, 64**-0.5, sinks)
    for rel in ("gpt_oss_20b/attention_sinks_prefill/reference.py",
                "gpt_oss_20b/attention_sinks_prefill/solutions/torch_eager.py"):
        got = _load(rel).run(q, k, v, sinks)[0].double()
        assert (got - expected).abs().max() < 2e-2, rel
    no_sink = _masked_attention(q[0], k[0], v[0], j <= i, 64**-0.5)
    assert (no_sink - expected).abs().max() > 0.05


def _e2m1(code: int) -> float:
    """FP4 e2m1 from its bits (OCP MX spec): sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is subnormal."""
    sign = -1.0 if code & 0b1000 else 1.0
    exp, man = (code >> 1) & 0b11, code & 1
    return sign * (man * 0.5 if exp == 0 else (1 + man / 2) * 2.0 ** (exp - 1))


def test_mxfp4_dequantize_decodes_every_code_and_scale():
    ref = _load("gpt_oss_20b/moe_mxfp4_gemm/reference.py")
    blocks = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(1, 8, 32)  # every byte once, 64 columns a row
    scales = torch.tensor([[120, 130]] * 8, dtype=torch.int32).to(torch.uint8).view(1, 8, 2)
    got = ref.dequantize(blocks, scales)
    for row in range(8):
        for col in range(64):
            byte = row * 32 + col // 2
            code = byte & 0x0F if col % 2 == 0 else byte >> 4
            want = _e2m1(code) * 2.0 ** ((120 if col < 32 else 130) - 127)
            assert math.isclose(got[0, row, col].item(), want), (row, col)


def test_group_limited_router_keeps_experts_inside_the_chosen_groups():
    ref = _load("deepseek_v3/group_limited_topk_router/reference.py")
    eager = _load("deepseek_v3/group_limited_topk_router/solutions/torch_eager.py")
    g = torch.Generator().manual_seed(4)
    logits, bias = torch.randn(64, 256, generator=g) * 2, torch.randn(256, generator=g) * 0.05
    weights, ids = ref.run(logits, bias)
    choice = torch.sigmoid(logits.double()) + bias.double()
    for t in range(64):
        groups = choice[t].view(8, 32).topk(2).values.sum(-1).topk(4).indices.tolist()
        allowed = [e for grp in groups for e in range(grp * 32, grp * 32 + 32)]
        best = sorted(allowed, key=lambda e: -choice[t, e].item())[:8]
        assert ids[t].tolist() == best
        w = torch.sigmoid(logits[t, best].double())
        assert torch.allclose(weights[t].double(), w / w.sum() * 2.5, atol=1e-6)
    ew, eid = eager.run(logits, bias)
    assert torch.equal(eid, ids) and torch.allclose(ew, weights, atol=1e-5)


ROUTER = "deepseek_v3/group_limited_topk_router"


def _route(logits, bias, *, limit_groups=True, biased_weights=False, by_id=False, scale=2.5):
    """Group-limited routing written out in float64, with switches for the mistakes a kernel can make."""
    t, e = logits.shape
    scores = torch.sigmoid(logits.double())
    choice = scores + bias.double()
    if limit_groups:
        top2 = choice.view(t, 8, e // 8).topk(2, dim=-1).values.sum(-1)
        kept = torch.zeros(t, 8, dtype=torch.bool).scatter_(1, top2.topk(4, dim=-1).indices, True)
        choice = choice.masked_fill(~kept.repeat_interleave(e // 8, dim=1), float("-inf"))
    ids = choice.topk(8, dim=-1).indices
    if by_id:
        ids = ids.sort(dim=-1).values
    w = (scores + bias.double() if biased_weights else scores).gather(1, ids)
    return (w / w.sum(-1, keepdim=True) * scale).float(), ids.to(torch.int32)


def _accepted(problem, workload, got, want) -> bool:
    from solbench.engine.correctness import compare_tensors

    tol = problem.tolerance_for(workload) if workload else problem.tolerance.model_copy(update={"max_mismatch_ratio": 0})
    return all(compare_tensors(g, w, tol.atol, tol.rtol, tol.max_mismatch_ratio).passed
               for g, w in zip(got, want, strict=True))


def _router_tie(rank_a: int):
    """Test-shape inputs twice, differing in one logit by two float32 steps: row 0's expert ranked
    ``rank_a + 1`` (among the kept groups' experts) is put level with the one ranked ``rank_a``, just
    below it in the first copy and just above in the second: either order is float32 rounding."""
    from solbench.data.problem import load_problem

    problem = load_problem(ROOT / ROUTER / "problem.yaml")
    ref = _load(f"{ROUTER}/reference.py")
    inputs = ref.make_inputs(problem.test_axes_resolved(), torch.Generator().manual_seed(11), "cpu")
    logits, bias = inputs["logits"], inputs["bias"]
    _, ids = _route(logits[:1], bias)
    choice = torch.sigmoid(logits[0].double()) + bias.double()
    kept = [int(e) for e in choice.argsort(descending=True) if int(e) // 32 in {int(i) // 32 for i in ids[0]}]
    a, b = kept[rank_a], kept[rank_a + 1]
    level = torch.logit(choice[a] - bias[b].double()).float()
    pair = []
    for toward in (-math.inf, math.inf):
        x = logits.clone()
        x[0, b] = torch.nextafter(level, torch.tensor(toward))
        pair.append(x)
    below, above = (torch.sigmoid(x[0, b].double()) + bias[b].double() for x in pair)
    assert below < choice[a] < above  # the two copies order a and b differently in float64
    return problem, ref, bias, pair


def test_group_limited_router_accepts_a_near_tie_either_way():
    """A tie in the order (ranks 3 and 4) moves 2 weights and 2 ids; one at the boundary (ranks 8 and 9) moves
    all 8 weights of the row: the problem's tolerance admits one such row where it says, and a float32 kernel's
    own answer on the tie."""
    eager = _load(f"{ROUTER}/solutions/torch_eager.py")
    for rank_a in (2, 7):
        problem, ref, bias, (lo, hi) = _router_tie(rank_a)
        want, got = ref.run(hi, bias), ref.run(lo, bias)
        assert not torch.equal(want[1][0], got[1][0]) and torch.equal(want[1][1:], got[1][1:])
        assert not _accepted(problem, None, got, want)  # the tie matters without the allowance
        for workload in ("decode_b256", "prefill_b1_s4096"):  # the test shape is 256 tokens, as decode_b256
            assert _accepted(problem, workload, got, want)
        assert _accepted(problem, "decode_b64", [o[:64] for o in got], [o[:64] for o in want])
        assert not _accepted(problem, "decode_b1", [o[:1] for o in got], [o[:1] for o in want])  # 8 elements: none
        assert _accepted(problem, "decode_b256", eager.run(hi, bias), want)


def test_group_limited_router_rejects_wrong_kernels():
    problem, ref, bias, (_, logits) = _router_tie(2)
    want = ref.run(logits, bias)
    assert all(torch.equal(a, b) for a, b in zip(_route(logits, bias), want, strict=True))  # the switches' baseline
    wrong = {"no group limit": {"limit_groups": False}, "weights from the biased choice": {"biased_weights": True},
             "ids by expert id": {"by_id": True}, "scaling dropped": {"scale": 1.0}}
    for name, switch in wrong.items():
        got = _route(logits, bias, **switch)
        for workload in ("decode_b256", "prefill_b4_s4096"):
            assert not _accepted(problem, workload, got, want), f"{name} passes {workload}"
        assert not _accepted(problem, "decode_b64", [o[:64] for o in got], [o[:64] for o in want]), name
    two_rows = [o.clone() for o in want]
    for o in two_rows:
        o[:2] = o[:2].flip(-1)  # two rows of 64 wrong: one more than ties explain
    assert not _accepted(problem, "decode_b64", [o[:64] for o in two_rows], [o[:64] for o in want])


def test_gated_delta_rule_matches_the_delta_rule_written_out():
    ref = _load("qwen3_next_80b_a3b/gated_delta_rule_decode/reference.py")
    g = torch.Generator().manual_seed(5)
    q, k = (torch.randn(2, 2, 16, generator=g).to(torch.bfloat16) for _ in range(2))
    v = torch.randn(2, 4, 8, generator=g).to(torch.bfloat16)
    decay, beta = -torch.rand(2, 4, generator=g), torch.rand(2, 4, generator=g)
    state = torch.randn(2, 4, 16, 8, generator=g)
    out, new = ref.run(q, k, v, decay, beta, state)
    for b in range(2):
        for h in range(4):
            qq = q[b, h // 2].double() / q[b, h // 2].double().norm() * 16**-0.5
            kk = k[b, h // 2].double() / k[b, h // 2].double().norm()
            s = state[b, h].double() * math.exp(decay[b, h].item())
            s = s + torch.outer(kk, beta[b, h].item() * (v[b, h].double() - kk @ s))
            assert torch.allclose(new[b, h].double(), s, atol=1e-5)
            assert torch.allclose(out[b, h].double(), qq @ s, atol=2e-2)
