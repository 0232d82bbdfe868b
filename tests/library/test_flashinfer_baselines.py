"""FlashInfer library baselines (``lib_flashinfer_*.py``) on the CPU, against a stand-in ``flashinfer`` package.

FlashInfer is not installed here (and its wheel is too big to travel to the H200), so a plain-torch stand-in
with FlashInfer's call signatures (flashinfer-python 0.7 sources: decode, prefill, mla, norm, rope) and its
documented layouts and semantics is put in ``sys.modules``: it checks what the real wrappers check (plan
before run, the planned dtypes, heads and page size against the tensors, a float32 cos/sin cache) and computes
the result its own way, in FlashInfer's layout (pages gathered per request, heads grouped by repeat, the causal
mask aligned to the bottom right). Each adapter's run() must then equal the problem's reference within its
tolerance at the test axes and pass the engine's edge rounds. Without the library, planning a problem lists
each adapter as skipped in one line.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types
from pathlib import Path

import pytest
import torch
from edge_check import edge_rounds, first_failure

from solbench.data.problem import load_problem
from solbench.engine.correctness import compare_tensors
from solbench.engine.problem_code import load_module, load_reference, make_inputs
from solbench.worker.candidate import baseline_of, missing_requirements, shipped_candidates

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = sorted((ROOT / "problems").glob("*/*/solutions/lib_flashinfer_*.py"))
HAVE_FLASHINFER = importlib.util.find_spec("flashinfer") is not None


def _dtype(name) -> torch.dtype:
    """FlashInfer's canonicalize_torch_dtype: a torch dtype or its name."""
    return getattr(torch, name) if isinstance(name, str) else name


def _page_rows(cache: torch.Tensor, indices: torch.Tensor, first: int, last: int, length: int) -> torch.Tensor:
    """One request's token rows: its pages indices[first:last], in order, cut to ``length`` tokens."""
    rows = [cache[int(page)] for page in indices[first:last]]
    return torch.cat(rows, dim=0)[:length]


def _softmax_attend(scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis of float32 scores [heads, queries, keys], then @ values [heads, keys, dv]."""
    return torch.matmul(torch.softmax(scores, dim=-1), values)


class _FakeDecodeWrapper:
    """flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper, NHD layout."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, use_tensor_cores=False,
                 paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None,
                 backend="auto", jit_args=None):
        assert float_workspace_buffer.dtype == torch.uint8 and kv_layout == "NHD"
        self._plan = None

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, *,
             pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, o_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None,
             non_blocking=True):
        assert pos_encoding_mode == "NONE" and window_left == -1 and not logits_soft_cap
        q_type = _dtype(q_data_type)
        self._plan = dict(indptr=indptr.tolist(), indices=indices.cpu(), last=last_page_len.tolist(),
                          heads=(num_qo_heads, num_kv_heads, head_dim), page_size=page_size, q_type=q_type,
                          kv_type=_dtype(kv_data_type) if kv_data_type is not None else q_type,
                          sm_scale=1 / math.sqrt(head_dim) if sm_scale is None else sm_scale)

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, window_left=None):
        plan = self._plan
        assert plan is not None, "plan() before run()"
        k_cache, v_cache = paged_kv_cache if isinstance(paged_kv_cache, tuple) else paged_kv_cache.unbind(1)
        hq, hkv, d = plan["heads"]
        assert q.dtype == plan["q_type"] and k_cache.dtype == v_cache.dtype == plan["kv_type"]
        assert q.shape[1:] == (hq, d) and k_cache.shape[1:] == (plan["page_size"], hkv, d) == v_cache.shape[1:]
        result = torch.empty(q.shape, dtype=q.dtype)
        for i, last in enumerate(plan["last"]):
            a, b = plan["indptr"][i], plan["indptr"][i + 1]
            length = (b - a - 1) * plan["page_size"] + last
            keys = _page_rows(k_cache, plan["indices"], a, b, length).float().repeat_interleave(hq // hkv, dim=1)
            values = _page_rows(v_cache, plan["indices"], a, b, length).float().repeat_interleave(hq // hkv, dim=1)
            scores = torch.einsum("hd,lhd->hl", q[i].float(), keys)[:, None, :] * plan["sm_scale"]
            result[i] = _softmax_attend(scores, values.transpose(0, 1))[:, 0].to(q.dtype)
        return result


class _FakeRaggedPrefillWrapper:
    """flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper, NHD layout."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 kv_indptr_buf=None, custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None):
        assert float_workspace_buffer.dtype == torch.uint8 and kv_layout == "NHD"
        self._plan = None

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None,
             custom_mask=None, packed_custom_mask=None, causal=False, pos_encoding_mode="NONE",
             use_fp16_qk_reduction=False, window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, sm_scale=None, rope_scale=None, rope_theta=None, non_blocking=True):
        assert custom_mask is None and packed_custom_mask is None and pos_encoding_mode == "NONE"
        self._plan = dict(qo=qo_indptr.tolist(), kv=kv_indptr.tolist(), heads=(num_qo_heads, num_kv_heads),
                          d=head_dim_qk, causal=causal, q_type=_dtype(q_data_type),
                          sm_scale=1 / math.sqrt(head_dim_qk) if sm_scale is None else sm_scale)

    def run(self, q, k, v, *args, out=None, lse=None, return_lse=False, enable_pdl=None):
        plan = self._plan
        assert plan is not None, "plan() before run()"
        hq, hkv = plan["heads"]
        assert q.dtype == plan["q_type"] and q.shape[1:] == (hq, plan["d"]) and k.shape[1] == hkv
        result = torch.empty(q.shape, dtype=q.dtype)
        for i in range(len(plan["qo"]) - 1):
            qs, ks = slice(plan["qo"][i], plan["qo"][i + 1]), slice(plan["kv"][i], plan["kv"][i + 1])
            qh = q[qs].float().transpose(0, 1)  # [HQ, qo_len, D]
            kh = k[ks].float().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
            vh = v[ks].float().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
            scores = torch.matmul(qh, kh.transpose(1, 2)) * plan["sm_scale"]
            if plan["causal"]:  # bottom-right aligned: query i sees keys j <= i + kv_len - qo_len
                qo_len, kv_len = qh.shape[1], kh.shape[1]
                hidden = torch.arange(kv_len)[None, :] > torch.arange(qo_len)[:, None] + (kv_len - qo_len)
                scores = scores.masked_fill(hidden, float("-inf"))
            result[qs] = _softmax_attend(scores, vh).transpose(0, 1).to(q.dtype)
        return result


class _FakeMLAWrapper:
    """flashinfer.mla.BatchMLAPagedAttentionWrapper (flat CSR plan), taken by keyword only."""

    def __init__(self, float_workspace_buffer, use_cuda_graph=False, qo_indptr=None, kv_indptr=None,
                 kv_indices=None, kv_len_arr=None, backend="auto"):
        assert float_workspace_buffer.dtype == torch.uint8
        self._plan = None

    def plan(self, *, qo_indptr, kv_indptr, kv_indices, kv_len_arr, num_heads, head_dim_ckv, head_dim_kpe,
             page_size, causal, sm_scale, q_data_type, kv_data_type, use_profiler=False):
        assert qo_indptr.dtype == kv_indptr.dtype == kv_indices.dtype == kv_len_arr.dtype == torch.int32
        self._plan = dict(qo=qo_indptr.tolist(), kv=kv_indptr.tolist(), indices=kv_indices.cpu(),
                          lens=kv_len_arr.tolist(), dims=(num_heads, head_dim_ckv, head_dim_kpe), page_size=page_size,
                          causal=causal, sm_scale=sm_scale, types=(q_data_type, kv_data_type))

    def run(self, *, q_nope, q_pe, ckv_cache, kpe_cache, out=None, lse=None, return_lse=False, profiler_buffer=None,
            kv_len=None, page_table=None, return_lse_base_on_e=False):
        plan = self._plan
        assert plan is not None, "plan() before run()"
        heads, c, r = plan["dims"]
        assert (q_nope.dtype, ckv_cache.dtype) == plan["types"] and not plan["causal"]
        assert q_nope.shape[1:] == (heads, c) and q_pe.shape[1:] == (heads, r)
        assert ckv_cache.shape[1:] == (plan["page_size"], c) and kpe_cache.shape[1:] == (plan["page_size"], r)
        result = torch.empty(q_nope.shape, dtype=q_nope.dtype)
        for i, length in enumerate(plan["lens"]):
            a, b, rows = plan["kv"][i], plan["kv"][i + 1], slice(plan["qo"][i], plan["qo"][i + 1])
            ckv = _page_rows(ckv_cache, plan["indices"], a, b, length).float()  # [L, C]
            kpe = _page_rows(kpe_cache, plan["indices"], a, b, length).float()
            scores = (torch.einsum("qhc,lc->hql", q_nope[rows].float(), ckv)
                      + torch.einsum("qhr,lr->hql", q_pe[rows].float(), kpe)) * plan["sm_scale"]
            result[rows] = _softmax_attend(scores, ckv.expand(heads, -1, -1)).transpose(0, 1).to(q_nope.dtype)
        return result


def _fake_rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None):  # noqa: A002 - FlashInfer's name
    """flashinfer.norm.rmsnorm: a new tensor, float32 math, one rounding."""
    xf = input.float()
    normed = xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) / xf.shape[-1] + eps) * weight.float()
    return normed.to(input.dtype)


def _fake_fused_add_rmsnorm(input, residual, weight, eps=1e-6, enable_pdl=None):  # noqa: A002
    """flashinfer.norm.fused_add_rmsnorm, in place: residual <- input + residual (rounded), input <- the norm of
    the float32 sum (before its rounding) times weight. Returns None."""
    total = input.float() + residual.float()
    residual.copy_(total.to(residual.dtype))
    input.copy_(_fake_rmsnorm(total, weight, eps).to(input.dtype))


def _fake_apply_rope_with_cos_sin_cache(positions, query, key, head_size, cos_sin_cache, is_neox=True):
    """flashinfer.rope.apply_rope_with_cos_sin_cache: query/key [nnz, heads * head_size], the cache [max_pos,
    rotary_dim] holding cosines then sines; new outputs of the inputs' shape."""
    if cos_sin_cache.dtype != torch.float32:
        raise ValueError("cos_sin_cache should be float32")
    assert is_neox and positions.shape == (query.shape[0],) and query.dim() == key.dim() == 2
    half = cos_sin_cache.shape[-1] // 2
    cos, sin = cos_sin_cache[positions.long(), :half][:, None, :], cos_sin_cache[positions.long(), half:][:, None, :]
    outs = []
    for x in (query, key):
        heads = x.view(x.shape[0], -1, head_size).float()  # view, as FlashInfer does: a copy would be refused
        first, second = heads[..., :half], heads[..., half:2 * half]
        rotated = torch.cat((first * cos - second * sin, second * cos + first * sin, heads[..., 2 * half:]), dim=-1)
        outs.append(rotated.to(x.dtype).reshape(x.shape[0], -1))
    return outs[0], outs[1]


def _install_fake_flashinfer(monkeypatch) -> None:
    """A ``flashinfer`` package of the stand-ins above in sys.modules (undone by monkeypatch)."""
    package = types.ModuleType("flashinfer")
    package.__path__ = []
    parts = {"decode": {"BatchDecodeWithPagedKVCacheWrapper": _FakeDecodeWrapper},
             "prefill": {"BatchPrefillWithRaggedKVCacheWrapper": _FakeRaggedPrefillWrapper},
             "mla": {"BatchMLAPagedAttentionWrapper": _FakeMLAWrapper},
             "norm": {"rmsnorm": _fake_rmsnorm, "fused_add_rmsnorm": _fake_fused_add_rmsnorm},
             "rope": {"apply_rope_with_cos_sin_cache": _fake_apply_rope_with_cos_sin_cache}}
    monkeypatch.setitem(sys.modules, "flashinfer", package)
    for name, members in parts.items():
        module = types.ModuleType(f"flashinfer.{name}")
        for member, value in members.items():
            setattr(module, member, value)
            setattr(package, member, value)  # FlashInfer re-exports them at the top level too
        setattr(package, name, module)
        monkeypatch.setitem(sys.modules, f"flashinfer.{name}", module)


def _adapter_id(path: Path) -> str:
    return f"{path.parents[2].name}.{path.parents[1].name}"


def _adapter_run(path: Path, monkeypatch):
    _install_fake_flashinfer(monkeypatch)
    return load_module(path, "flashinfer_baseline").run


def test_flashinfer_adapters_ship_for_the_problems_that_fit_its_api():
    assert {_adapter_id(p) for p in ADAPTERS} == {
        "llama3_1_8b.paged_attention_decode", "llama3_1_8b.varlen_prefill_attention", "deepseek_v3.mla_paged_decode",
        "llama3_1_8b.rmsnorm", "llama3_1_8b.fused_add_rmsnorm", "llama3_1_8b.rope"}


@pytest.mark.skipif(HAVE_FLASHINFER, reason="flashinfer is installed here: the real one is not replaced")
@pytest.mark.parametrize("path", ADAPTERS, ids=_adapter_id)
def test_flashinfer_adapter_matches_the_reference(path, monkeypatch):
    """run() at the test axes (two seeds) equals the reference within the tolerance and writes no input."""
    problem = load_problem(path.parents[1] / "problem.yaml")
    run = _adapter_run(path, monkeypatch)
    for seed in (1234, 5):
        inputs = make_inputs(problem, problem.test_axes_resolved(), seed=seed, device="cpu")
        pristine = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        want = load_reference(problem)(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs.values()])
        got = run(*inputs.values())
        tol = problem.tolerance_for(problem.workloads[0])
        pairs = zip(problem.outputs, *(x if isinstance(x, tuple) else (x,) for x in (got, want)), strict=True)
        for name, g, w in pairs:
            assert g.shape == w.shape and g.dtype == w.dtype, name
            verdict = compare_tensors(g, w, tol.atol, tol.rtol, tol.max_mismatch_ratio)
            assert verdict.passed, f"{name}: {verdict.reason}"
        assert all(torch.equal(inputs[k], v) for k, v in pristine.items()), "an input was written"


@pytest.mark.skipif(HAVE_FLASHINFER, reason="flashinfer is installed here: the real one is not replaced")
@pytest.mark.parametrize("path", ADAPTERS, ids=_adapter_id)
def test_flashinfer_adapter_passes_the_edge_rounds(path, monkeypatch):
    """The engine's edge rounds (stressed value domains, strided layouts) at the problem's small shape."""
    problem = load_problem(path.parents[1] / "problem.yaml")
    assert any(r.skipped is None for r in edge_rounds(problem))
    assert first_failure(problem, _adapter_run(path, monkeypatch)) is None


@pytest.mark.skipif(HAVE_FLASHINFER, reason="flashinfer is installed here: the real one is not replaced")
def test_the_stand_in_catches_a_wrong_mask_and_a_dropped_clone(monkeypatch):
    """The check can fail: a non-causal plan misses the reference, and the in-place call without clones writes
    the problem's inputs."""
    folder = ROOT / "problems" / "llama3_1_8b" / "varlen_prefill_attention"
    problem = load_problem(folder / "problem.yaml")
    _install_fake_flashinfer(monkeypatch)
    inputs = make_inputs(problem, problem.test_axes_resolved(), seed=3, device="cpu")
    wrapper = _FakeRaggedPrefillWrapper(torch.empty(8, dtype=torch.uint8))
    wrapper.plan(inputs["cu_seqlens"], inputs["cu_seqlens"], 4, 2, 16, causal=False, q_data_type=torch.bfloat16,
                 sm_scale=inputs["sm_scale"])
    got = wrapper.run(inputs["q"], inputs["k"], inputs["v"])
    assert not compare_tensors(got, load_reference(problem)(*inputs.values()), 1e-2, 1e-2).passed
    x, residual, weight = torch.randn(2, 8).bfloat16(), torch.randn(2, 8).bfloat16(), torch.randn(8).bfloat16()
    before = x.clone()
    sys.modules["flashinfer.norm"].fused_add_rmsnorm(x, residual, weight, eps=1e-5)
    assert not torch.equal(x, before)


@pytest.mark.skipif(HAVE_FLASHINFER, reason="flashinfer is installed here")
def test_flashinfer_adapters_are_skipped_without_flashinfer():
    from solbench.api import plan_run

    for path in ADAPTERS:
        assert missing_requirements(path) == ["flashinfer"]
        assert path not in shipped_candidates(path.parents[1])
        lines: list[str] = []
        (item,) = plan_run([path.parents[1]], small=True, log=lines.append)
        assert path.name not in [c.path.name for c in item.candidates]
        assert f"skipped: {_adapter_id(path)} {path.name}: needs flashinfer, not installed here " \
               "(install it to run this candidate)" in lines


def test_the_record_names_flashinfer_python_and_its_installed_version(tmp_path, monkeypatch):
    """BASELINE is the distribution pip installs (its dist-info folder is flashinfer_python-X.dist-info)."""
    assert {baseline_of(p)["library"] for p in ADAPTERS} == {"flashinfer-python"}
    if not HAVE_FLASHINFER:
        assert baseline_of(ADAPTERS[0])["version"] == "unknown"
    info = tmp_path / "flashinfer_python-0.7.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.7.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert baseline_of(ADAPTERS[0]) == {"library": "flashinfer-python", "version": "0.7.0"}


def test_the_baselines_extra_names_the_libraries_and_the_test_extra_does_not():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {requirement.split(">")[0].split("<")[0].split("=")[0] for requirement in extras["baselines"]}
    assert names >= {"liger-kernel", "flashinfer-python"}
    assert not [r for r in extras["test"] if r.split(">")[0].split(";")[0].strip() in names]
