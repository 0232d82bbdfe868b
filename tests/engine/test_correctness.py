"""solbench.engine.correctness: the tolerance rule, NaN/Inf and zero-output rules, output descriptions, mutation."""

from __future__ import annotations

import math

import pytest
import torch

from solbench.engine.correctness import MalformedReply, check_outputs, compare_tensors, mutated_inputs


def _independent_mismatches(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> int:
    """The rule written out element by element in Python floats (no torch broadcasting)."""
    bad = 0
    for o, r in zip(out.double().reshape(-1).tolist(), ref.double().reshape(-1).tolist(), strict=True):
        if math.isnan(r) and math.isnan(o):
            continue
        if math.isinf(r) and o == r:
            continue
        if not (math.isfinite(o) and math.isfinite(r) and abs(o - r) <= atol + rtol * abs(r)):
            bad += 1
    return bad


def test_random_perturbations_match_an_elementwise_count():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 33, generator=g)
    noise = torch.randn(64, 33, generator=g) * 1e-3
    out = ref + noise
    for atol, rtol in [(1e-4, 1e-4), (1e-3, 0.0), (0.0, 1e-2), (2e-3, 1e-3)]:
        cmp = compare_tensors(out, ref, atol, rtol)
        expected = _independent_mismatches(out, ref, atol, rtol)
        assert cmp.mismatches == expected
        assert cmp.passed == (expected == 0)
        assert cmp.max_abs_err == pytest.approx(float((out.double() - ref.double()).abs().max()))


def test_a_comparison_in_chunks_gives_the_whole_tensors_figures(monkeypatch):
    """Chunks of 7 elements (so every chunk edge cuts the tensors) against one chunk: the same verdict, counts,
    maxima (NaN too), first mismatch and its place, over random tensors with NaN, Inf, zeros and misses."""
    import solbench.engine.correctness as correctness

    g = torch.Generator().manual_seed(5)
    for case in range(120):
        shape = (int(torch.randint(1, 9, (1,), generator=g)), int(torch.randint(1, 13, (1,), generator=g)))
        ref = torch.randn(shape, generator=g)
        out = ref + torch.randn(shape, generator=g) * 1e-2 * (case % 3)
        for t in (out, ref):
            special = torch.rand(shape, generator=g)
            t[special < 0.05] = math.nan
            t[(special > 0.95)] = math.inf
            t[(special > 0.45) & (special < 0.5)] = 0.0
        if case % 4 == 0:
            out = torch.zeros(shape)
        dtype = (torch.float32, torch.bfloat16, torch.int32)[case % 3]
        out, ref = out.nan_to_num(0.0).to(dtype) if dtype == torch.int32 else out.to(dtype), \
            ref.nan_to_num(0.0).to(dtype) if dtype == torch.int32 else ref.to(dtype)
        monkeypatch.setattr(correctness, "COMPARE_CHUNK_NUMEL", 1 << 30)
        whole = compare_tensors(out, ref, 1e-2, 1e-2, 0.1 * (case % 2)).as_dict()
        monkeypatch.setattr(correctness, "COMPARE_CHUNK_NUMEL", 7)
        chunked = compare_tensors(out, ref, 1e-2, 1e-2, 0.1 * (case % 2)).as_dict()
        assert chunked == whole or (str(chunked) == str(whole)), (case, chunked, whole)


def test_exact_output_passes_with_zero_tolerance():
    ref = torch.randn(5, 7, dtype=torch.bfloat16)
    cmp = compare_tensors(ref.clone(), ref, 0.0, 0.0)
    assert cmp.passed and cmp.mismatches == 0 and cmp.max_abs_err == 0.0


def test_first_bad_index_and_values():
    ref = torch.zeros(3, 4) + 1.0
    out = ref.clone()
    out[1, 2] = 5.0
    out[2, 3] = 7.0
    cmp = compare_tensors(out, ref, 1e-3, 1e-3)
    assert not cmp.passed
    assert cmp.first_bad_index == [1, 2]
    assert cmp.first_bad_value == 5.0 and cmp.first_bad_expected == 1.0
    assert cmp.mismatches == 2 and cmp.mismatch_ratio == pytest.approx(2 / 12)
    assert cmp.max_abs_err == 6.0
    assert cmp.max_rel_err == pytest.approx(6.0)
    assert "(1, 2)" in cmp.reason


def test_nan_in_output_never_passes_even_with_huge_tolerance_or_allowance():
    ref = torch.ones(1000)
    out = ref.clone()
    out[10] = float("nan")
    cmp = compare_tensors(out, ref, 1e9, 1e9, max_mismatch_ratio=0.01)
    assert not cmp.passed and cmp.nonfinite_mismatches == 1
    assert "NaN/Inf" in cmp.reason
    out[10] = float("inf")
    assert not compare_tensors(out, ref, 1e9, 1e9, max_mismatch_ratio=0.01).passed


def test_same_nonfinite_as_reference_passes():
    ref = torch.tensor([1.0, float("nan"), float("inf"), float("-inf")])
    assert compare_tensors(ref.clone(), ref, 1e-5, 1e-5).passed
    flipped = ref.clone()
    flipped[2] = float("-inf")
    assert not compare_tensors(flipped, ref, 1e-5, 1e-5).passed
    finite_where_nan = ref.clone()
    finite_where_nan[1] = 0.0
    assert not compare_tensors(finite_where_nan, ref, 1e9, 1e9).passed


def test_all_zero_output_never_passes_against_nonzero_reference():
    ref = torch.full((256,), 1e-6)  # every element within atol of zero
    cmp = compare_tensors(torch.zeros(256), ref, 1e-2, 1e-2)
    assert not cmp.passed and "all zeros" in cmp.reason
    assert compare_tensors(torch.zeros(4), torch.zeros(4), 0.0, 0.0).passed


def test_mismatch_ratio_allowance():
    ref = torch.arange(1000, dtype=torch.float32)
    out = ref.clone()
    out[:5] += 100.0  # 0.5% wrong
    assert compare_tensors(out, ref, 1e-3, 1e-3, max_mismatch_ratio=0.01).passed
    assert not compare_tensors(out, ref, 1e-3, 1e-3, max_mismatch_ratio=0.001).passed
    assert not compare_tensors(out, ref, 1e-3, 1e-3).passed


def test_integers_and_bools_must_match_exactly():
    ref = torch.tensor([1, 2, 3], dtype=torch.int64)
    assert compare_tensors(ref.clone(), ref, 10.0, 10.0).passed
    assert not compare_tensors(torch.tensor([1, 2, 4]), ref, 10.0, 10.0).passed
    b = torch.tensor([True, False])
    assert not compare_tensors(~b, b, 1.0, 1.0).passed


def test_shape_or_dtype_mismatch_is_a_caller_error():
    with pytest.raises(ValueError):
        compare_tensors(torch.zeros(2), torch.zeros(3), 0, 0)


# --- output descriptions (as the worker sends them) -----------------------------------------

def _desc(t: torch.Tensor, **over) -> dict:
    d = {"kind": "tensor", "type": "torch.Tensor", "exact": True, "shape": list(t.shape),
         "dtype": str(t.dtype).removeprefix("torch."), "device": "cpu", "contiguous": True, "data": t}
    d.update(over)
    return d


@pytest.fixture
def ref():
    return {"out": torch.randn(4, 8)}


def test_check_outputs_passes_and_reports(ref):
    check = check_outputs([_desc(ref["out"].clone())], ref, "cpu", 1e-5, 1e-5)
    assert check.passed and check.as_dict()["out"]["mismatches"] == 0


@pytest.mark.parametrize("descs, fragment", [
    ([], "returned 0 output(s)"),
    ([{"kind": "other", "type": "NoneType"}], "is a NoneType, not a torch.Tensor"),
    ([{"kind": "tensor", "type": "mod.Sneaky", "exact": False}], "subclass"),
])
def test_check_outputs_structural_reasons(ref, descs, fragment):
    check = check_outputs(descs, ref, "cpu", 1e-5, 1e-5)
    assert not check.passed and fragment in check.reason


def test_check_outputs_device_dtype_shape(ref):
    t = ref["out"]
    assert "on cuda, expected cpu" in check_outputs([_desc(t, device="cuda")], ref, "cpu", 0, 0).reason
    assert "dtype float64" in check_outputs([_desc(t, dtype="float64", data=None)], ref, "cpu", 0, 0).reason
    assert "shape (8, 4)" in check_outputs([_desc(t, shape=[8, 4], data=None)], ref, "cpu", 0, 0).reason


def test_check_outputs_rejects_data_that_contradicts_its_description(ref):
    with pytest.raises(MalformedReply):
        check_outputs([_desc(ref["out"], data=torch.zeros(2, 2))], ref, "cpu", 0, 0)
    with pytest.raises(MalformedReply):
        check_outputs("not a list", ref, "cpu", 0, 0)


def test_mutated_inputs_bitwise_and_nan_safe():
    x = torch.tensor([1.0, float("nan")])
    sent = {"x": x, "eps": 1e-6}
    assert mutated_inputs(sent, [x.clone(), 1e-6]) == []
    changed = x.clone()
    changed[0] = 2.0
    assert mutated_inputs(sent, [changed, 1e-6]) == ["x"]
    assert mutated_inputs(sent, [changed, 1e-6], allowed={"x"}) == []
    assert mutated_inputs(sent, [{"kind": "resized", "shape": [3]}, 1e-6]) == ["x"]
    neg_zero = torch.tensor([-0.0, float("nan")])
    assert mutated_inputs({"x": torch.tensor([0.0, float("nan")])}, [neg_zero]) == ["x"]  # bits differ
    with pytest.raises(MalformedReply):
        mutated_inputs(sent, [x])
