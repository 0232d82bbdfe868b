"""PyTorch library baselines (``lib_torch_*.py``) on the CPU at each problem's test axes, against the problem's
reference within its tolerance and through the engine's edge rounds: flex_attention runs uncompiled (its math
path; the compiled kernel is the H200's), the SDPA backends that exist only on CUDA (cuDNN, memory-efficient)
are swapped for the math backend (same call, same arguments), and torch._grouped_mm runs as it is."""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from edge_check import edge_rounds, run_round

from solbench.data.problem import load_problem
from solbench.engine.correctness import compare_tensors
from solbench.engine.problem_code import load_module, load_reference, make_inputs

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "problems"
BASELINES = sorted([*SOLUTIONS.glob("*/*/solutions/lib_torch_flex_attention.py"),
                    *SOLUTIONS.glob("*/*/solutions/lib_torch_sdpa_*.py"),
                    *SOLUTIONS.glob("*/*/solutions/lib_torch_grouped_mm.py")])


def _baseline_id(path: Path) -> str:
    return f"{path.parents[2].name}.{path.parents[1].name}/{path.stem}"


@contextmanager
def _math_backend(_backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        yield


def _cpu_run(path: Path, monkeypatch):
    """The baseline's run(), with its CUDA-only call swapped for the same call on a CPU path."""
    module = load_module(path, "torch_baseline")
    if path.stem == "lib_torch_flex_attention":
        from torch.nn.attention.flex_attention import flex_attention

        monkeypatch.setattr(module, "_compiled", flex_attention)  # eager flex: the same call, on its math path
    elif path.stem in ("lib_torch_sdpa_cudnn", "lib_torch_sdpa_efficient"):
        monkeypatch.setattr(module, "sdpa_kernel", _math_backend)  # the CPU has flash and math kernels only
    return module.run


def _check_against_reference(folder: Path, run) -> None:
    """run() at the test axes equals the reference within the problem's tolerance and leaves its inputs intact."""
    problem = load_problem(folder / "problem.yaml")
    inputs = make_inputs(problem, problem.test_axes_resolved(), seed=1234, device="cpu")
    pristine = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    want = load_reference(problem)(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs.values()])
    got = run(*inputs.values())
    tol = problem.tolerance_for(problem.workloads[0])
    for name, g, w in zip(problem.outputs, *(x if isinstance(x, tuple) else (x,) for x in (got, want)), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        verdict = compare_tensors(g, w, tol.atol, tol.rtol, tol.max_mismatch_ratio)
        assert verdict.passed, f"{name}: {verdict.reason}"
    assert all(torch.equal(inputs[k], v) for k, v in pristine.items())


@pytest.mark.parametrize("path", BASELINES, ids=_baseline_id)
def test_torch_baseline_matches_the_reference(path, monkeypatch):
    _check_against_reference(path.parents[1], _cpu_run(path, monkeypatch))


@pytest.mark.parametrize("path", BASELINES, ids=_baseline_id)
def test_torch_baseline_passes_the_edge_rounds(path, monkeypatch):
    """The engine's edge rounds (stressed value domains, strided layouts) at the problem's small shape."""
    problem = load_problem(path.parents[1] / "problem.yaml")
    run = _cpu_run(path, monkeypatch)
    ran = [r for r in edge_rounds(problem) if r.skipped is None]
    assert ran
    failures = {r.name: why for r in ran if (why := run_round(problem, r, run)) is not None}
    assert not failures, failures


def test_chunked_flex_mask_cuts_at_the_chunk_boundary(monkeypatch):
    """A chunk of 64 in a 256-token prompt (the test axes hold one chunk of 8192): the reference takes the chunk
    as an input too, so both see four chunks."""
    folder = SOLUTIONS / "llama4_scout" / "chunked_attention_prefill"
    problem = load_problem(folder / "problem.yaml")
    inputs = make_inputs(problem, problem.test_axes_resolved(), seed=5, device="cpu")
    inputs["chunk"] = 64
    got = _cpu_run(folder / "solutions" / "lib_torch_flex_attention.py", monkeypatch)(*inputs.values())
    tol = problem.tolerance
    assert compare_tensors(got, load_reference(problem)(*inputs.values()), tol.atol, tol.rtol).passed
    inputs["chunk"] = 8192
    assert not compare_tensors(got, load_reference(problem)(*inputs.values()), tol.atol, tol.rtol).passed


def _assert_blocks_are_create_block_masks(mask, batch: int, kv_length: int, kv_block: int, queries: int = 1) -> None:
    """A decode block mask built by hand lists, per sequence, query block and once each, the KV blocks in which
    create_block_mask finds some position its mask_mod keeps (full or partial blocks): the eager CPU path reads
    the mask_mod only, the compiled kernel visits the listed blocks only."""
    from torch.nn.attention.flex_attention import create_block_mask

    want = create_block_mask(mask.mask_mod, batch, None, queries, kv_length, device="cpu",
                             BLOCK_SIZE=(128, kv_block))
    assert mask.kv_num_blocks.shape == want.kv_num_blocks.shape
    for b, m in itertools.product(range(batch), range(want.kv_num_blocks.shape[-1])):
        listed = mask.kv_indices[b, 0, m, :mask.kv_num_blocks[b, 0, m]].tolist()
        kept = [*want.kv_indices[b, 0, m, :want.kv_num_blocks[b, 0, m]].tolist(),
                *want.full_kv_indices[b, 0, m, :want.full_kv_num_blocks[b, 0, m]].tolist()]
        assert len(listed) == len(set(listed)) and set(listed) == set(kept), (b, m)


# axes to shrink, and the query rows a sequence has (MLA's heads are query rows: over 128, two query blocks)
PAGED_DECODE = {"llama3_1_8b/paged_attention_decode": ({"HQ": 4, "HKV": 2, "D": 16}, {}),
                "deepseek_v3/mla_paged_decode": ({"H": 4, "C": 32, "R": 64}, {"queries": 200})}


@pytest.mark.parametrize("page_size", [1, 4, 16, 48, 64, 128])
@pytest.mark.parametrize("problem_dir", PAGED_DECODE)
def test_paged_flex_block_mask_lists_the_blocks_its_mask_mod_keeps(problem_dir, page_size):
    """Page sizes under, at and over a 16-slot tile, and pages of several tiles (48, 128)."""
    folder = SOLUTIONS / problem_dir
    module = load_module(folder / "solutions" / "lib_torch_flex_attention.py", "torch_baseline")
    problem = load_problem(folder / "problem.yaml")
    overrides, rows = PAGED_DECODE[problem_dir]
    axes = problem.resolve_axes({"B": 5, "PS": page_size, "KV_PAGES": 40}, overrides=overrides)
    inputs = make_inputs(problem, axes, seed=7, device="cpu")
    owner = module._slot_owner(inputs["kv_indptr"], inputs["kv_indices"], inputs["kv_last_page_len"],
                               axes["POOL"], page_size)
    block = module._kv_block_size(page_size)
    assert block >= 16 and block & (block - 1) == 0 and (page_size % block == 0 or block % page_size == 0)
    mask = module._paged_block_mask(owner, axes["B"], block, **rows)
    _assert_blocks_are_create_block_masks(mask, axes["B"], owner.shape[0], block, **rows)


@pytest.mark.parametrize(("length", "window"), [(4160, 4096), (4096, 4096), (300, 4096), (1000, 200), (1024, 256)])
def test_sliding_window_flex_block_mask_lists_the_window_blocks(length, window):
    """Windows starting inside a block, at 0 (cache shorter than the window), on a block boundary."""
    module = load_module(SOLUTIONS / "mistral_7b" / "attention_decode_sliding_window" / "solutions"
                         / "lib_torch_flex_attention.py", "torch_baseline")
    mask = module._window_block_mask(length, max(0, length - window), "cpu")
    _assert_blocks_are_create_block_masks(mask, 1, length, module.KV_BLOCK)
