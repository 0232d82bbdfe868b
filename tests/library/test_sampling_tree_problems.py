"""Top-k/top-p sampling and speculative tree-verify attention: their fast Triton candidates against the
references (Triton's interpreter without CUDA, tiny sizes), the sampling definition against counts made
here, plausible wrong kernels failing the problem's own tolerance, and the cost hooks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported
pytest.importorskip("triton")
from test_triton_kernels import DEVICE  # noqa: E402  (sets TRITON_INTERPRET and patches the interpreter)

from solbench.data.problem import load_problem  # noqa: E402
from solbench.engine.correctness import compare_tensors  # noqa: E402
from solbench.engine.problem_code import call_cost, load_cost, load_module, load_reference, make_inputs  # noqa: E402
from solbench.engine.work import workload_work  # noqa: E402

ROOT = Path(__file__).resolve().parents[2] / "problems" / "llama3_1_8b"
SAMPLING = ROOT / "top_k_top_p_sampling"
TREE = ROOT / "tree_verify_attention"


def _case(folder: Path, var: dict, shrink: dict, seed: int = 3, scalars: dict | None = None):
    p = load_problem(folder)
    axes = p.resolve_axes(var, overrides=shrink)
    inputs = make_inputs(p, axes, seed, device=DEVICE, scalars=scalars)
    return p, axes, inputs, load_reference(p)(*inputs.values())


def _passes(p, got, want) -> bool:
    tol = p.tolerance
    return compare_tensors(got.cpu(), want.cpu(), tol.atol, tol.rtol, tol.max_mismatch_ratio).passed


def _module(folder: Path, file: str):
    return load_module(folder / "solutions" / file, "sampling_tree_test")


# --- top-k / top-p sampling -----------------------------------------------------------------

SETTINGS = [(5, 0.9, 0.6), (16, 0.8, 1.3), (3, 1.0, 1.0)]  # (top_k, top_p, temperature)


def _sample_inputs(batch: int, vocab: int, settings: tuple, seed: int = 3):
    k, top_p, temp = settings
    return _case(SAMPLING, {"B": batch}, {"V": vocab}, seed, {"top_k": k, "top_p": top_p, "temperature": temp})


@pytest.mark.parametrize("settings", SETTINGS)
def test_sampling_triton(settings: tuple) -> None:
    p, _, inputs, want = _sample_inputs(6, 300, settings)
    got = _module(SAMPLING, "triton_top_k_top_p.py").sample(*inputs.values(), chunk=64, num_warps=4)
    assert got.dtype == torch.int32 and torch.equal(got.cpu(), want.cpu())


def test_sampling_ties_go_to_the_lower_id() -> None:
    # Coarse logits: many ties, at the top-k boundary too; only the lower-id rule gives the reference.
    p, _, inputs, _ = _sample_inputs(8, 200, (6, 1.0, 1.0))
    logits = (inputs["logits"] * 2).round() / 2
    v, _ = logits.sort(-1, descending=True)
    assert bool((v[:, 5] == v[:, 6]).any())
    inputs = dict(inputs, logits=logits)
    want = load_reference(p)(*inputs.values())
    got = _module(SAMPLING, "triton_top_k_top_p.py").sample(*inputs.values(), chunk=64, num_warps=4)
    assert torch.equal(got.cpu(), want.cpu())
    flipped = load_reference(p)(logits.flip(-1), inputs["u"], 6, 1.0, 1.0)  # ties to the higher id, mapped back
    assert not torch.equal(logits.shape[-1] - 1 - flipped.long(), want.long())


def test_sampling_frequencies_are_the_filtered_distribution() -> None:
    # Independent of the reference's method: u on a fine grid must hit each kept token in proportion to
    # its probability after temperature, top-k (ranked here with ties to the lower id) and top-p.
    p, axes, inputs, _ = _sample_inputs(1, 64, (8, 0.7, 0.8), seed=5)
    logits = inputs["logits"][0].double()
    order = sorted(range(64), key=lambda i: (-float(logits[i]), i))[:8]
    probs = torch.softmax(logits[order] / 0.8, 0)
    kept = [tok for j, tok in enumerate(order) if float(probs[:j].sum()) < 0.7]
    mass = torch.softmax(logits[kept] / 0.8, 0)
    grid = 4096
    u = (torch.arange(grid, dtype=torch.float64) + 0.5) / grid
    tokens = load_reference(p)(inputs["logits"].expand(grid, -1), u.float(), 8, 0.7, 0.8)
    counts = torch.bincount(tokens.long(), minlength=64)
    assert set(torch.nonzero(counts)[:, 0].tolist()) == set(kept)
    assert torch.allclose(counts[kept].double() / grid, mass, atol=2 / grid)


def _wrong_sampler(bug: str):
    def run(logits, u, top_k, top_p, temperature):
        x = logits / (1.0 if bug == "no temperature" else temperature)
        values, ids = torch.sort(x, dim=-1, descending=True, stable=True)
        if bug != "top-p on the full vocabulary":
            values, ids = values[:, :top_k], ids[:, :top_k]
        prob = torch.softmax(values, -1)
        prob = prob.masked_fill(prob.cumsum(-1) - prob >= top_p, 0.0)
        if bug == "top-p on the full vocabulary":  # then top-k: the nucleus of the unfiltered distribution
            prob, ids = prob[:, :top_k], ids[:, :top_k]
        if bug != "ranking-order CDF":
            ids, perm = torch.sort(ids, dim=-1)
            prob = prob.gather(-1, perm)
        cdf = prob.cumsum(-1)
        total = cdf[:, -1:] if bug != "no renormalisation" else torch.ones_like(cdf[:, -1:])
        pos = torch.searchsorted(cdf, u[:, None] * total, right=True).clamp(max=ids.shape[-1] - 1)
        return ids.gather(-1, pos)[:, 0].to(torch.int32)
    return run


@pytest.mark.parametrize("bug", ["no temperature", "top-p on the full vocabulary", "ranking-order CDF",
                                 "no renormalisation"])
def test_sampling_wrong_kernels_fail(bug: str) -> None:
    p, _, inputs, want = _sample_inputs(64, 2048, (50, 0.9, 0.6))
    right = _wrong_sampler("")(*inputs.values())
    assert _passes(p, right, want)  # the harness's float32 version of the definition passes
    assert not _passes(p, _wrong_sampler(bug)(*inputs.values()), want)


def test_sampling_cost_depends_on_the_workload_top_k() -> None:
    p = load_problem(SAMPLING)
    for name, k in [("decode_b64_llama_instruct", 50), ("decode_b64_wide", 256)]:
        w = p.workload(name)
        assert p.scalars_for(w)["top_k"] == k
        assert workload_work(p, p.resolve_axes(w), w) == (64 * (128256 + 6 * k), 64 * 128256 * 4 + 64 * 8)
    p, axes, inputs, _ = _sample_inputs(4, 512, (0, 0.9, 1.0))  # top_k disabled: every token a candidate
    assert call_cost(p, load_cost(p), axes, inputs).flops == 4 * (512 + 6 * 512)


def test_sampling_logits_are_zipf_like_with_ties() -> None:
    _, _, inputs, _ = _sample_inputs(32, 128256, (50, 0.9, 0.6), seed=0)
    top = torch.softmax(inputs["logits"].double(), -1).max(-1).values
    assert float(top.min()) < 0.2 and float(top.max()) > 0.5  # flat and peaked rows
    assert bool((inputs["logits"] == inputs["logits"].bfloat16().float()).all())
    v, _ = inputs["logits"].sort(-1, descending=True)
    assert bool((v[:, 49] == v[:, 50]).any())  # ties at the top-k boundary happen


# --- tree verification attention ------------------------------------------------------------

TREE_SMALL = {"HQ": 8, "HKV": 2, "D": 16}


@pytest.mark.parametrize("ps", [1, 4])
@pytest.mark.parametrize("chunk", [4, 64])  # 4: chunks of draft keys only, where some rows see nothing
def test_tree_verify_triton(ps: int, chunk: int) -> None:
    p, _, inputs, want = _case(TREE, {"B": 3, "N": 6, "PS": ps, "KV_PAGES": 24 // ps}, TREE_SMALL)
    got = _module(TREE, "triton_tree_verify.py").tree_verify(*inputs.values(), chunk=chunk, block_n=4, tb=4)
    assert got.dtype == torch.bfloat16 and _passes(p, got, want)


def _tree_wrong(inputs: dict, bug: str) -> dict:
    mask, n = inputs["tree_mask"], inputs["tree_mask"].shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=DEVICE)
    if bug == "causal among drafts":  # a chain instead of the tree
        return dict(inputs, tree_mask=torch.ones_like(mask).tril())
    if bug == "no tree mask":
        return dict(inputs, tree_mask=torch.ones_like(mask))
    if bug == "not itself":
        return dict(inputs, tree_mask=mask & ~eye | (eye & (torch.arange(n, device=DEVICE) == 0)))
    return dict(inputs, kv_indices=torch.arange(len(inputs["kv_indices"]), dtype=torch.int32, device=DEVICE))


@pytest.mark.parametrize("bug", ["causal among drafts", "no tree mask", "not itself", "pages in order"])
def test_tree_verify_wrong_kernels_fail(bug: str) -> None:
    p, _, inputs, want = _case(TREE, {"B": 3, "N": 8, "PS": 4, "KV_PAGES": 6}, TREE_SMALL)
    assert not _passes(p, load_reference(p)(*_tree_wrong(inputs, bug).values()), want)


def _parents(mask: torch.Tensor) -> list[int]:
    """Each node's parent: its deepest proper ancestor (-1 for the root)."""
    depth = mask.sum(-1)
    return [max((j for j in range(i) if mask[i, j]), key=lambda j: int(depth[j]), default=-1)
            for i in range(mask.shape[0])]


def test_tree_masks_are_trees_like_eagle() -> None:
    _, _, inputs, _ = _case(TREE, {"B": 4, "N": 64, "PS": 16, "KV_PAGES": 8}, {"D": 8})
    for mask in inputs["tree_mask"].cpu():
        parents = _parents(mask)
        for i, par in enumerate(parents[1:], start=1):  # ancestors of i = ancestors of its parent + i
            expected = mask[par].clone()
            expected[i] = True
            assert torch.equal(mask[i], expected)
        depth = int(mask.sum(-1).max()) - 1
        assert 3 <= depth <= 10 and len(set(parents)) > depth + 1  # shallow and branching, not a chain


def test_tree_verify_cost_counts_attended_pairs() -> None:
    p, axes, inputs, _ = _case(TREE, {"B": 5, "N": 16, "PS": 16, "KV_PAGES": 40}, {})
    starts, last = inputs["kv_indptr"].tolist(), inputs["kv_last_page_len"].tolist()
    prefix = sum((starts[i + 1] - starts[i] - 1) * 16 + last[i] for i in range(5))
    ancestors = sum(len(_chain(_parents(m.cpu()), i)) for m in inputs["tree_mask"] for i in range(16))
    c = call_cost(p, load_cost(p), axes, inputs)
    assert c.flops == 4 * 128 * 32 * (16 * prefix + ancestors)
    assert c.bytes == (prefix * 8 * 128 * 2 * 2 + 5 * 16 * 128 * 2 * (2 * 32 + 2 * 8)
                       + 4 * (6 + 40 + 5) + 5 * 16 * 16)
    assert c.bytes < p.auto_bytes(axes)


def _chain(parents: list[int], i: int) -> list[int]:
    return [i] + (_chain(parents, parents[i]) if parents[i] >= 0 else [])
