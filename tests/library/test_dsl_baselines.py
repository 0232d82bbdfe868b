"""The CuTe-DSL library baselines (quack, FlashAttention 4) on the CPU, against plain-torch stand-ins of the libraries.

Each adapter's run() is checked against its problem's reference at the test axes, with the library replaced by a
plain-torch stand-in of its Python-level contract (quack-kernels 0.6.5's and flash-attn-4 4.0.0b36's signatures,
layouts, dtypes and return values, as their source states them), there and through the engine's edge rounds; and,
without the library, the one `skipped:` line each adapter gets."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch
from edge_check import edge_rounds, first_failure
from test_torch_baselines import _check_against_reference

from solbench.data.problem import load_problem
from solbench.engine.problem_code import load_module

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "problems"
# the GEMM adapters (lib_quack_gemm*) stand in for quack.gemm_interface: tests/library/test_quack_gemm_baselines.py
QUACK = sorted(p for p in PROBLEMS.glob("*/*/solutions/lib_quack_*.py") if not p.stem.startswith("lib_quack_gemm"))
FA4 = sorted(PROBLEMS.glob("*/*/solutions/lib_fa4_*.py"))
QUACK_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _baseline_id(path: Path) -> str:
    return f"{path.parents[2].name}.{path.parents[1].name}/{path.stem}"


# quack: quack.rmsnorm, quack.cross_entropy (quack/__init__.py re-exports both)


def _quack_rmsnorm(x, weight=None, bias=None, residual=None, out_dtype=None, residual_dtype=None, eps=1e-6,
                   prenorm=False, weight_offset=0.0):
    assert x.dtype in QUACK_DTYPES and bias is None and residual is None and not prenorm
    xf = x.float()  # float32 statistics, the weight (plus its offset) in float32, one rounding to out_dtype
    out = xf / torch.sqrt(xf.square().mean(-1, keepdim=True) + eps)
    if weight is not None:
        out = out * (weight.float() + weight_offset)
    return out.to(out_dtype or x.dtype)


def _quack_cross_entropy(x, target, lse_partial=None, weight=None, ignore_index=-100, reduction="mean",
                         inplace_backward=False):
    assert x.dim() == 2 and target.dim() == 1 and lse_partial is None and weight is None
    assert x.dtype in QUACK_DTYPES and target.dtype in (torch.int32, torch.int64)
    xf = x.float()
    kept = target != ignore_index
    picked = xf.gather(1, target.clamp(min=0).long()[:, None])[:, 0]
    loss = torch.where(kept, torch.logsumexp(xf, 1) - picked, 0.0)  # float32, whatever x's dtype
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / kept.sum().float()  # "mean" is its default


# flash-attn-4: flash_attn.cute.flash_attn_func and flash_attn_varlen_func, each returning (out, lse)


def _fa_attention(q, k, v, softmax_scale, causal):
    """One sequence, FlashAttention's conventions: q [Sq, HQ, D], k/v [Sk, HKV, D]; query head h reads KV head
    h // (HQ / HKV); the causal mask is aligned to the bottom right; lse [HQ, Sq]."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[:2]
    kv_head = torch.arange(hq) // (hq // hkv)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()[:, kv_head]) * (softmax_scale or d**-0.5)
    if causal:
        future = torch.arange(sk)[None, :] > torch.arange(sq)[:, None] + (sk - sq)
        scores = scores.masked_fill(future, float("-inf"))
    out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.float()[:, kv_head])
    return out.to(q.dtype), scores.logsumexp(-1)


def _fa_checks(q, k, v, qv):
    assert qv is None, "qv (MLA's absorbed q) is not this problem's"
    assert q.dtype == k.dtype == v.dtype and v.dtype in (torch.float16, torch.bfloat16)
    assert q.shape[-2] % k.shape[-2] == 0


def _flash_attn_func(q, k, v, qv=None, gather_kv_indices=None, softmax_scale=None, causal=False,
                     window_size=(None, None), learnable_sink=None, softcap=0.0, num_splits=1, pack_gqa=None,
                     deterministic=False, score_mod=None, score_mod_bwd=None, mask_mod=None, aux_tensors=None,
                     aux_scalars=None, block_sparse_tensors=None, block_sparse_tensors_bwd=None, return_lse=False,
                     gather_bwd_recompute_p=False, gather_bwd_token_chunk=None):
    _fa_checks(q, k, v, qv)
    assert q.dim() == 4 and gather_kv_indices is None
    pairs = [_fa_attention(q[b], k[b], v[b], softmax_scale, causal) for b in range(q.shape[0])]
    return torch.stack([o for o, _ in pairs]), torch.stack([lse for _, lse in pairs])  # lse [B, HQ, S]


def _flash_attn_varlen_func(q, k, v, qv=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                            max_seqlen_k=None, min_seqlen_k=None, seqused_q=None, seqused_k=None,
                            gather_kv_indices=None, page_table=None, softmax_scale=None, causal=False, **rest):
    _fa_checks(q, k, v, qv)
    assert q.dim() == 3 and cu_seqlens_q.dtype == cu_seqlens_k.dtype == torch.int32
    bq, bk = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    lengths = [b - a for a, b in zip(bq, bq[1:], strict=False)]
    # a bound below the longest sequence would drop query rows in the real kernel's grid
    assert max_seqlen_q is None or max_seqlen_q >= max(lengths)
    out, lse = torch.empty_like(q), torch.empty(q.shape[1], q.shape[0])
    for i in range(len(bq) - 1):
        rows = slice(bq[i], bq[i + 1])
        out[rows], lse[:, rows] = _fa_attention(q[rows], k[bk[i]:bk[i + 1]], v[bk[i]:bk[i + 1]], softmax_scale, causal)
    return out, lse  # lse [HQ, T]


def _install_stand_ins(monkeypatch):
    quack = types.ModuleType("quack")
    quack.rmsnorm, quack.cross_entropy = _quack_rmsnorm, _quack_cross_entropy
    flash_attn, cute = types.ModuleType("flash_attn"), types.ModuleType("flash_attn.cute")
    cute.flash_attn_func, cute.flash_attn_varlen_func = _flash_attn_func, _flash_attn_varlen_func
    flash_attn.cute = cute
    for name, module in (("quack", quack), ("flash_attn", flash_attn), ("flash_attn.cute", cute)):
        monkeypatch.setitem(sys.modules, name, module)


def test_the_adapters_ship_where_the_semantics_match():
    assert {_baseline_id(p) for p in QUACK + FA4} == {
        "llama3_1_8b.rmsnorm/lib_quack_rmsnorm", "qwen3_30b_a3b.rmsnorm/lib_quack_rmsnorm",
        "llama3_1_8b.cross_entropy/lib_quack_cross_entropy", "llama3_1_8b.attention_prefill/lib_fa4_attention",
        "llama3_1_8b.varlen_prefill_attention/lib_fa4_attention"}


@pytest.mark.parametrize("path", QUACK + FA4, ids=_baseline_id)
def test_dsl_baseline_matches_the_reference(path, monkeypatch):
    _install_stand_ins(monkeypatch)
    _check_against_reference(path.parents[1], load_module(path, "dsl_baseline").run)


@pytest.mark.parametrize("path", QUACK + FA4, ids=_baseline_id)
def test_dsl_baseline_passes_the_edge_rounds(path, monkeypatch):
    """The engine's edge rounds (stressed value domains, strided layouts) at the problem's small shape."""
    _install_stand_ins(monkeypatch)
    problem = load_problem(path.parents[1] / "problem.yaml")
    assert any(r.skipped is None for r in edge_rounds(problem))
    assert first_failure(problem, load_module(path, "dsl_baseline").run) is None


def test_the_stand_in_tells_a_wrong_call_from_a_right_one(monkeypatch):
    """The stand-ins are strict enough to fail an adapter that drops quack's reduction="none" or passes
    FlashAttention's scale by position (where the real signature puts qv)."""
    _install_stand_ins(monkeypatch)
    logits, targets = torch.randn(4, 16), torch.randint(0, 16, (4,))
    assert sys.modules["quack"].cross_entropy(logits, targets).shape == ()  # its default is the mean
    q = torch.randn(1, 8, 4, 16, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 2, 16, dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="qv"):
        sys.modules["flash_attn.cute"].flash_attn_func(q, k, k, 0.25)


@pytest.mark.skipif(any(importlib.util.find_spec(m) for m in ("quack", "flash_attn")),
                    reason="quack or flash_attn is installed here")
def test_without_the_libraries_each_adapter_is_one_skipped_line():
    from solbench.api import plan_run

    for path in QUACK + FA4:
        lines: list[str] = []
        (item,) = plan_run([path.parents[1]], log=lines.append)
        assert path.name not in [c.path.name for c in item.candidates]
        module = "quack" if path in QUACK else "flash_attn.cute"
        problem = f"{path.parents[2].name}.{path.parents[1].name}"
        assert f"skipped: {problem} {path.name}: needs {module}, not installed here " \
               "(install it to run this candidate)" in lines
