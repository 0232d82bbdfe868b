"""The problems whose work depends on their data (paged and ragged attention, MoE routing): their fast
Triton candidates against the reference (in Triton's interpreter without CUDA, at tiny ragged sizes,
page sizes 1 and 4), plausible wrong kernels failing the problem's own tolerance, and the cost hooks
against counts made here from the inputs.
"""

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

ROOT = Path(__file__).resolve().parents[2] / "problems"
PAGED = ROOT / "llama3_1_8b" / "paged_attention_decode"
MLA = ROOT / "deepseek_v3" / "mla_paged_decode"
VARLEN = ROOT / "llama3_1_8b" / "varlen_prefill_attention"
MOE = ROOT / "qwen3_30b_a3b" / "moe_grouped_gemm"


def _case(folder: Path, var: dict, shrink: dict, seed: int = 3):
    p = load_problem(folder)
    axes = p.resolve_axes(var, overrides=shrink)
    inputs = make_inputs(p, axes, seed, device=DEVICE)
    return p, axes, inputs, load_reference(p)(*[v.clone() if hasattr(v, "clone") else v for v in inputs.values()])


def _passes(p, got, want) -> bool:
    tol = p.tolerance
    return compare_tensors(got.cpu(), want.cpu(), tol.atol, tol.rtol, tol.max_mismatch_ratio).passed


def _candidate(folder: Path, file: str):
    return load_module(folder / "solutions" / file, "triton_test")


# --- paged GQA decode -----------------------------------------------------------------------

PAGED_SMALL = {"HQ": 8, "HKV": 2, "D": 16}


@pytest.mark.parametrize("ps", [1, 4])
@pytest.mark.parametrize("chunk", [8, 64])  # 8: long sequences cut in several chunks, merged
def test_paged_decode_triton(ps: int, chunk: int) -> None:
    p, _, inputs, want = _case(PAGED, {"B": 3, "PS": ps, "KV_PAGES": 48 // ps}, PAGED_SMALL)
    got = _candidate(PAGED, "triton_paged_decode.py").paged_decode(*inputs.values(), chunk=chunk, block_n=4)
    assert got.dtype == torch.bfloat16 and _passes(p, got, want)


def _paged_wrong(inputs: dict, bug: str) -> dict:
    bad = dict(inputs)
    if bug == "pages in order":  # ignores the page table: reads the pool as if pages were contiguous
        bad["kv_indices"] = torch.arange(len(inputs["kv_indices"]), dtype=torch.int32, device=DEVICE)
    elif bug == "full last page":  # attends over the padding of each last page
        bad["kv_last_page_len"] = torch.full_like(inputs["kv_last_page_len"], 4)
    elif bug == "one sequence's pages":  # off by one in kv_indptr
        bad["kv_indptr"] = inputs["kv_indptr"].clone()
        bad["kv_indptr"][1] += 1
    return bad


@pytest.mark.parametrize("bug", ["pages in order", "full last page", "one sequence's pages"])
def test_paged_decode_wrong_kernels_fail(bug: str) -> None:
    p, _, inputs, want = _case(PAGED, {"B": 3, "PS": 4, "KV_PAGES": 12}, PAGED_SMALL)
    if bug == "full last page":
        assert bool((inputs["kv_last_page_len"] < 4).any())
    got = load_reference(p)(*_paged_wrong(inputs, bug).values())
    assert not _passes(p, got, want)


def test_paged_decode_cost_counts_tokens_present() -> None:
    p, axes, inputs, _ = _case(PAGED, {"B": 5, "PS": 16, "KV_PAGES": 40}, {})
    starts, last = inputs["kv_indptr"].tolist(), inputs["kv_last_page_len"].tolist()
    tokens = sum((starts[i + 1] - starts[i] - 1) * 16 + last[i] for i in range(5))
    c = call_cost(p, load_cost(p), axes, inputs)
    assert c.flops == 4 * tokens * 32 * 128
    assert c.bytes == tokens * 8 * 128 * 2 * 2 + 2 * 5 * 32 * 128 * 2 + 4 * (6 + 40 + 5)
    assert c.bytes < p.auto_bytes(axes)  # not the pool, not the padding


def test_paged_lengths_are_skewed() -> None:
    _, _, inputs, _ = _case(PAGED, {"B": 64, "PS": 16, "KV_PAGES": 4096}, {"D": 8})
    pages = (inputs["kv_indptr"][1:] - inputs["kv_indptr"][:-1]).float()
    assert pages.max() > 4 * pages.median()  # a long tail, not equal lengths


# --- MLA paged decode -----------------------------------------------------------------------

@pytest.mark.parametrize("ps", [1, 4])
def test_mla_paged_decode_triton(ps: int) -> None:
    p, _, inputs, want = _case(MLA, {"B": 3, "PS": ps, "KV_PAGES": 24 // ps}, {"H": 16})
    got = _candidate(MLA, "triton_mla_paged_decode.py").mla_paged_decode(*inputs.values(), chunk=8, block_n=4)
    assert _passes(p, got, want)


def test_mla_wrong_kernels_fail() -> None:
    p, _, inputs, want = _case(MLA, {"B": 3, "PS": 4, "KV_PAGES": 12}, {"H": 16})
    no_rope = dict(inputs)  # scores from the latent dims only
    no_rope["q"] = inputs["q"].clone()
    no_rope["q"][..., 512:] = 0
    in_order = dict(inputs, kv_indices=torch.arange(12, dtype=torch.int32, device=DEVICE))
    for bad in (no_rope, in_order):
        assert not _passes(p, load_reference(p)(*bad.values()), want)


# --- varlen prefill -------------------------------------------------------------------------

@pytest.mark.parametrize("block", [8, 16])
def test_varlen_attention_triton(block: int) -> None:
    p, _, inputs, want = _case(VARLEN, {"B": 4, "T": 45}, {"HQ": 4, "HKV": 2, "D": 16})
    got = _candidate(VARLEN, "triton_varlen_attention.py").varlen_attention(*inputs.values(), block_m=block,
                                                                           block_n=block, num_warps=4)
    assert _passes(p, got, want)


def test_varlen_wrong_kernels_fail() -> None:
    p, axes, inputs, want = _case(VARLEN, {"B": 4, "T": 45}, {"HQ": 4, "HKV": 2, "D": 16})
    one_sequence = dict(inputs, cu_seqlens=torch.tensor([0, 45], dtype=torch.int32, device=DEVICE).repeat_interleave(
        torch.tensor([1, 4])))  # cu = [0, 45, 45, 45, 45]: attends across sequence boundaries
    assert not _passes(p, load_reference(p)(*one_sequence.values()), want)
    import torch.nn.functional as F

    bounds = inputs["cu_seqlens"].tolist()
    not_causal = torch.cat([F.scaled_dot_product_attention(inputs["q"][a:b].transpose(0, 1),
                                                           inputs["k"][a:b].transpose(0, 1),
                                                           inputs["v"][a:b].transpose(0, 1), enable_gqa=True,
                                                           scale=inputs["sm_scale"]).transpose(0, 1)
                            for a, b in zip(bounds, bounds[1:], strict=False)])
    assert not _passes(p, not_causal, want)


def test_varlen_cost_is_the_causal_pairs() -> None:
    p, axes, inputs, _ = _case(VARLEN, {"B": 8, "T": 4096}, {})
    lengths = (inputs["cu_seqlens"][1:] - inputs["cu_seqlens"][:-1]).tolist()
    pairs = sum(sum(range(1, n + 1)) for n in lengths)
    assert call_cost(p, load_cost(p), axes, inputs).flops == 4 * 128 * 32 * pairs


# --- MoE grouped GEMM -----------------------------------------------------------------------

MOE_SMALL = {"H": 80, "F": 24, "E": 8, "K": 3}


@pytest.mark.parametrize("t", [1, 13])
def test_moe_grouped_gemm_triton(t: int) -> None:
    p, _, inputs, want = _case(MOE, {"T": t}, MOE_SMALL)
    got = _candidate(MOE, "triton_grouped_gemm.py").grouped_gemm(*inputs.values(), block_m=16, block_n=16,
                                                                 block_k=32)
    assert _passes(p, got, want)


def test_moe_wrong_kernels_fail() -> None:
    p, _, inputs, want = _case(MOE, {"T": 13}, MOE_SMALL)
    ids = inputs["topk_ids"]
    first_expert_only = dict(inputs, topk_ids=ids[:, :1].expand_as(ids).contiguous())
    off_by_one = dict(inputs, topk_ids=(ids + 1) % 8)
    for bad in (first_expert_only, off_by_one):
        assert not _passes(p, load_reference(p)(*bad.values()), want)


def test_moe_cost_counts_touched_experts_and_routing_is_skewed() -> None:
    p, axes, inputs, _ = _case(MOE, {"T": 16}, {})
    touched = len(set(inputs["topk_ids"].flatten().tolist()))
    c = call_cost(p, load_cost(p), axes, inputs)
    assert c.bytes == 16 * 2048 * 2 + touched * 1536 * 2048 * 2 + 16 * 8 * 4 + 16 * 8 * 1536 * 2
    assert touched < 128
    _, _, big, _ = _case(MOE, {"T": 4096}, {"H": 8, "F": 4})
    load = torch.bincount(big["topk_ids"].flatten().long(), minlength=128).float()
    assert load.max() > 4 * load.median()  # hot experts, as trained routers have
