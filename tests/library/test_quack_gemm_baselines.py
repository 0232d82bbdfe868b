"""quack's CuTe-DSL GEMM baselines (``lib_quack_gemm*.py``) on the CPU, against a stand-in quack.gemm_interface.

The stand-in keeps quack-kernels 0.6.5's Python-level contract as its source states it: gemm, gemm_add and
gemm_act/gemm_gated with their signatures; A (M, K) and B (K, N); every operand with one unit-stride dim of its
last two, the other stride and the base address multiples of 16 bytes (gemm_tvm_ffi_utils: div_for_dtype,
assumed_align); D allocated (M, N) in out_dtype, else A's dtype; float32 accumulation with C, the bias and the
activation applied to it before one rounding; concat_layout=("B",) interleaving B's two halves along its
non-contiguous dim (gemm_ref's _concat_interleave), gated activations reading gate and up from alternate columns.
Each adapter is checked against its problem's reference at the test axes and through the engine's edge rounds."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from edge_check import edge_rounds, first_failure
from test_torch_baselines import _check_against_reference

from solbench.data.problem import load_problem
from solbench.engine.problem_code import load_module

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = sorted((ROOT / "problems").glob("*/*/solutions/lib_quack_gemm*.py"))
MMA_DTYPES = (torch.float16, torch.bfloat16)
ACTIVATIONS = {None: lambda x: x, "gelu_tanh_approx": lambda x: F.gelu(x, approximate="tanh")}
GATED = {"swiglu": lambda gate, up: F.silu(gate) * up}


def _adapter_id(path: Path) -> str:
    return f"{path.parents[2].name}.{path.parents[1].name}/{path.stem}"


def _check_layout(name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    """What quack's compiled signature takes: a static unit stride, 16-byte divisible strides and base."""
    assert tuple(t.shape) == shape, f"{name}: shape {tuple(t.shape)}, quack expects {shape}"
    unit = 16 // t.element_size()
    assert t.data_ptr() % 16 == 0, f"{name}: base address not 16-byte aligned"
    if t.dim() == 1:
        assert t.stride(0) == 1, f"{name}: strides {t.stride()}"
        return
    unit_dim = -1 if t.stride(-1) == 1 else -2
    other = -3 - unit_dim  # the other of the last two dims
    assert t.stride(unit_dim) == 1, f"{name}: strides {t.stride()}, neither of the last two dims is unit-stride"
    assert t.stride(other) % unit == 0 and (t.stride(other) > 0 or t.shape[other] == 1), \
        f"{name}: stride {t.stride(other)} not a positive multiple of 16 bytes"


def _concat_interleave(t: torch.Tensor) -> torch.Tensor:
    """quack's gemm_ref: [first; second] halves along the non-contiguous dim, interleaved row by row."""
    dim = -2 if t.stride(-1) == 1 else -1
    return t.unflatten(dim, (2, t.shape[dim] // 2)).transpose(dim - 1, dim).flatten(dim - 1, dim)


def _accumulate(A, B, C=None, bias=None, concat_layout=None) -> torch.Tensor:
    """alpha * A @ B + C + bias in float32, as quack's epilogue holds it before the store."""
    assert A.dtype == B.dtype and A.dtype in MMA_DTYPES, (A.dtype, B.dtype)
    (m, k), n = A.shape, B.shape[-1]
    _check_layout("A", A, (m, k))
    _check_layout("B", B, (k, n))
    assert not concat_layout or tuple(concat_layout) == ("B",), concat_layout
    acc = A.float() @ (_concat_interleave(B) if concat_layout else B).float()
    if C is not None:
        _check_layout("C", C, (m, n))
        acc = acc + C.float()
    if bias is not None:
        _check_layout("bias", bias, (n,))
        acc = acc + bias.float()
    return acc


def _store(acc: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """D as quack allocates it: (M, N) contiguous, so its rows too must be 16-byte multiples."""
    assert acc.shape[-1] * dtype.itemsize % 16 == 0, f"D rows of {acc.shape[-1]} {dtype} elements"
    return acc.to(dtype)


def _gemm(A, B, out=None, bias=None, alpha=1.0, out_dtype=None, *, tuned=True, concat_layout=None, **unused):
    assert out is None and alpha == 1.0 and not unused, unused
    return _store(_accumulate(A, B, bias=bias, concat_layout=concat_layout), out_dtype or A.dtype)


def _gemm_add(A, B, C, out=None, bias=None, alpha=1.0, beta=1.0, out_dtype=None, *, tuned=True, **unused):
    assert out is None and alpha == beta == 1.0 and not unused, unused
    return _store(_accumulate(A, B, C, bias), out_dtype or A.dtype)


def _gemm_act(A, B, C=None, bias=None, activation=None, alpha=1.0, preact_out=None, postact_out=None,
              out_dtype=None, postact_dtype=None, *, store_preact=True, tuned=True, concat_layout=None, **unused):
    assert preact_out is None and postact_out is None and alpha == 1.0 and not unused, unused
    gated = activation in GATED
    acc = _accumulate(A, B, C, bias, concat_layout if gated else None)  # quack drops concat_layout ungated
    post = GATED[activation](acc[..., ::2], acc[..., 1::2]) if gated else ACTIVATIONS[activation](acc)
    pre = _store(acc, out_dtype or A.dtype) if store_preact else None
    return pre, _store(post, postact_dtype or A.dtype)


def _install_stand_in(monkeypatch) -> types.ModuleType:
    quack, interface = types.ModuleType("quack"), types.ModuleType("quack.gemm_interface")
    interface.gemm, interface.gemm_add = _gemm, _gemm_add
    interface.gemm_act = interface.gemm_gated = _gemm_act  # one function in quack (gemm_gated = gemm_act)
    quack.gemm_interface = interface
    monkeypatch.setitem(sys.modules, "quack", quack)
    monkeypatch.setitem(sys.modules, "quack.gemm_interface", interface)
    return interface


def test_the_gemm_adapters_ship_where_quack_fits():
    gemm = ["llama3_1_8b.qkv_proj", "llama3_1_8b.lm_head", "phi3_mini.lm_head", "qwen3_30b_a3b.qkv_proj",
            "qwen2_5_7b.down_proj_decode", "qwen3_30b_a3b.router_gate", "qwen2_5_7b.qkv_proj_bias",
            "llama3_1_8b.linear_backward"]
    gemm_add = ["llama3_1_8b.attn_o_proj_residual", "llama3_1_8b.mlp_down_proj_residual",
                "llama3_1_70b.down_proj_residual", "qwen3_30b_a3b.o_proj_residual"]
    gated = ["llama3_1_8b.gate_up_swiglu", "phi3_mini.gate_up_swiglu", "llama4_scout.shared_expert_gate_up_swiglu"]
    assert {_adapter_id(p) for p in ADAPTERS} == {
        *(f"{p}/lib_quack_gemm" for p in gemm), *(f"{p}/lib_quack_gemm_add" for p in gemm_add),
        *(f"{p}/lib_quack_gemm_gated" for p in gated), "flux1_dev.mlp_fc1_gelu/lib_quack_gemm_act"}


@pytest.mark.parametrize("path", ADAPTERS, ids=_adapter_id)
def test_gemm_adapter_matches_the_reference(path, monkeypatch):
    _install_stand_in(monkeypatch)
    _check_against_reference(path.parents[1], load_module(path, "quack_gemm_baseline").run)


@pytest.mark.parametrize("path", ADAPTERS, ids=_adapter_id)
def test_gemm_adapter_passes_the_edge_rounds(path, monkeypatch):
    """The engine's edge rounds (stressed values; these problems declare no layout rounds: the next test)."""
    _install_stand_in(monkeypatch)
    problem = load_problem(path.parents[1] / "problem.yaml")
    assert any(r.skipped is None for r in edge_rounds(problem))
    assert first_failure(problem, load_module(path, "quack_gemm_baseline").run) is None


def _padded_rows(t: torch.Tensor) -> torch.Tensor:
    """The same values with rows 3 elements longer (not 16-byte multiples): a narrowed view."""
    return torch.zeros(*t.shape[:-1], t.shape[-1] + 3, dtype=t.dtype).narrow(-1, 0, t.shape[-1]).copy_(t)


def _shifted_base(t: torch.Tensor) -> torch.Tensor:
    """The same values, contiguous, starting one element (2 bytes for bf16) past an aligned address."""
    return torch.zeros(t.numel() + 1, dtype=t.dtype)[1:].view(t.shape).copy_(t)


def _column_major(t: torch.Tensor) -> torch.Tensor:
    return t.mT.contiguous().mT if t.dim() >= 2 else t


@pytest.mark.parametrize("view", [_padded_rows, _shifted_base, _column_major], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("path", ADAPTERS, ids=_adapter_id)
def test_gemm_adapter_takes_views_quack_cannot_load(path, view, monkeypatch):
    """Every input as a view quack's TMA would refuse (or, column-major, read as the other operand major), at once:
    the adapter hands quack loadable operands and still matches the reference."""
    _install_stand_in(monkeypatch)
    run = load_module(path, "quack_gemm_baseline").run
    _check_against_reference(path.parents[1], lambda *args: run(*(view(a) if isinstance(a, torch.Tensor) else a
                                                                   for a in args)))


def test_the_stand_in_refuses_what_quack_refuses(monkeypatch):
    """An [N, K] weight passed as B, rows padded off 16 bytes and a shifted base address all fail, as in quack."""
    quack = _install_stand_in(monkeypatch)
    x, weight = torch.randn(4, 64, dtype=torch.bfloat16), torch.randn(32, 64, dtype=torch.bfloat16)
    assert quack.gemm(x, weight.mT).shape == (4, 32)
    with pytest.raises(AssertionError, match="B: shape"):
        quack.gemm(x, weight)
    padded = torch.randn(4, 67, dtype=torch.bfloat16)[:, :64]
    with pytest.raises(AssertionError, match="not a positive multiple of 16 bytes"):
        quack.gemm(padded, weight.mT)
    with pytest.raises(AssertionError, match="16-byte aligned"):
        quack.gemm(torch.randn(4, 72, dtype=torch.bfloat16)[:, 1:65], weight.mT)


def test_the_gated_stand_in_pairs_halves_only_from_a_k_major_weight(monkeypatch):
    """concat_layout=("B",) reads [gate; up] right from a row-major weight; from an n-major copy it interleaves K
    instead (quack pairs along B's non-contiguous dim), which is why the adapter keeps the weight row-major."""
    quack = _install_stand_in(monkeypatch)
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    weight = (torch.randn(2 * 16, 64) / 8).to(torch.bfloat16)
    gate, up = (x.float() @ weight.float().t()).chunk(2, dim=-1)
    want = F.silu(gate) * up
    _, got = quack.gemm_gated(x, weight.mT, activation="swiglu", store_preact=False, concat_layout=("B",))
    torch.testing.assert_close(got.float(), want, atol=1e-2, rtol=2e-2)
    n_major = weight.t().contiguous()  # (K, N) with N contiguous: the same values, the other layout
    _, wrong = quack.gemm_gated(x, n_major, activation="swiglu", store_preact=False, concat_layout=("B",))
    assert not torch.allclose(wrong.float(), want, atol=1e-2, rtol=2e-2)


@pytest.mark.skipif(importlib.util.find_spec("quack") is not None, reason="quack is installed here")
def test_without_quack_each_gemm_adapter_is_one_skipped_line():
    from solbench.api import plan_run

    for path in ADAPTERS:
        lines: list[str] = []
        (item,) = plan_run([path.parents[1]], log=lines.append)
        assert path.name not in [c.path.name for c in item.candidates]
        problem = f"{path.parents[2].name}.{path.parents[1].name}"
        assert f"skipped: {problem} {path.name}: needs quack.gemm_interface, not installed here " \
               "(install it to run this candidate)" in lines
