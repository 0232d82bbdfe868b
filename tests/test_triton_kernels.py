"""The shipped Triton candidates, checked against independent float32 torch computations.

Without CUDA the kernels run in Triton's interpreter (TRITON_INTERPRET=1), which is slow, so the
shapes are tiny and ragged (T in {1, 3, 17}, dims that are not multiples of the blocks) and the
inner launchers are called with small blocks. On a GPU the same tests run compiled.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

triton = pytest.importorskip("triton")

from solbench.inputs import load_module  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems" / "llama3_1_8b"
DEVICE = "cuda" if ON_GPU else "cpu"
T_SIZES = (1, 3, 17)


def _patch_interpreter() -> None:
    """Two bugs of Triton 3.6's interpreter under numpy >= 2.4 that would otherwise hide real checks.

    - scalar kernel arguments are 1-element arrays, and ``int()`` of those now raises, which breaks
      ``range(0, K, BLOCK)`` loops;
    - bfloat16 is stored as uint16 and ``tl.dot`` multiplies the raw bits.
    Both are patched to do what the compiled kernel does.
    """
    import numpy as np
    from triton.runtime import interpreter as interp

    if getattr(interp, "_solbench_patched", False):
        return
    original_patch = interp._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    original_dot = interp.InterpreterBuilder.create_dot

    def as_f32(h):
        if h.dtype == triton.language.bfloat16:
            return interp.TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32), triton.language.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original_dot(self, as_f32(a), as_f32(b), d, input_precision, max_num_imprecise_acc)

    interp._patch_lang_tensor = patch_lang_tensor
    interp.InterpreterBuilder.create_dot = create_dot
    interp._solbench_patched = True


if not ON_GPU:
    _patch_interpreter()


def candidate(op: str, file: str):
    path = PROBLEMS / op / "solutions" / file
    if not path.is_file():
        pytest.skip(f"{path.relative_to(ROOT)} not present")
    return load_module(path, "triton_test")


def randn(*shape: int, dtype=torch.bfloat16, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype).to(DEVICE)


def assert_close(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    err = (got.double().cpu() - want.double().cpu()).abs()
    bound = atol + rtol * want.double().cpu().abs()
    assert bool((err <= bound).all()), f"max error {err.max().item():.4g} (bound at worst {bound[err > bound].min():.4g})"


# --- GEMM + residual epilogue ---------------------------------------------------------------

GEMM_FILES = [("attn_o_proj_residual", "triton_gemm_residual.py"),
              ("mlp_down_proj_residual", "triton_gemm_residual.py")]
# Small blocks so the tiny shapes still span several tiles in M, N and K; GROUP_M=2 exercises the
# grouped ordering with a partial last group.
SMALL_GEMM = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 2}


@pytest.mark.parametrize("op,file", GEMM_FILES)
@pytest.mark.parametrize("m", T_SIZES)
@pytest.mark.parametrize("k", [64, 80])  # 80: a K tail, the masked path
def test_gemm_residual(op: str, file: str, m: int, k: int) -> None:
    mod = candidate(op, file)
    n = 48
    a, w, r = randn(m, k, seed=1), randn(n, k, seed=2), randn(m, n, seed=3)
    out = mod.gemm_residual(a, w, r, config=SMALL_GEMM)
    want = a.float() @ w.float().t() + r.float()
    assert out.dtype == torch.bfloat16
    assert_close(out, want, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("m", T_SIZES)
@pytest.mark.parametrize("subtile", [False, True])
def test_tma_gemm_residual(m: int, subtile: bool) -> None:
    mod = candidate("attn_o_proj_residual", "triton_tma_gemm_residual.py")
    n, k = 48, 80  # 80 = 2.5 K blocks: TMA's zero fill past K is what makes the tail exact
    a, w, r = randn(m, k, seed=1), randn(n, k, seed=2), randn(m, n, seed=3)
    config = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 2, "EPILOGUE_SUBTILE": subtile}
    out = mod.tma_gemm_residual(a, w, r, config=config)
    assert_close(out, a.float() @ w.float().t() + r.float(), atol=2e-2, rtol=1e-2)


def test_gemm_residual_configs_cover_every_m() -> None:
    """Every M regime has tiles, and the decode tiles stream the weight with >= 64 CTAs at N=4096."""
    mod = candidate("attn_o_proj_residual", "triton_gemm_residual.py")
    for m in (1, 16, 17, 64, 65, 512, 2048, 2049, 16384):
        configs = mod.configs_for_m(m)
        assert configs and all(c in mod.ALL_CONFIGS for c in configs)
        if m <= 16:
            assert all(4096 // c.kwargs["BLOCK_N"] >= 64 for c in configs)


def test_gemm_residual_run_matches_reference_signature() -> None:
    mod = candidate("attn_o_proj_residual", "triton_gemm_residual.py")
    if not ON_GPU:
        pytest.skip("run() autotunes, which needs a GPU; the kernel itself is tested above")
    a, w, r = randn(5, 4096, seed=1), randn(4096, 4096, seed=2), randn(5, 4096, seed=3)
    assert_close(mod.run(a, w, r), a.float() @ w.float().t() + r.float(), atol=1e-2, rtol=2e-2)


# --- row-wise norms -------------------------------------------------------------------------

def rmsnorm_f32(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.double()
    return (xf / (xf.square().mean(-1, keepdim=True) + eps).sqrt() * w.double()).float()


@pytest.mark.parametrize("t", T_SIZES)
@pytest.mark.parametrize("h", [48, 64])  # 48: the row is shorter than its power-of-two block
def test_rmsnorm(t: int, h: int) -> None:
    mod = candidate("rmsnorm", "triton_rmsnorm.py")
    x, w = randn(t, h, seed=1) * 3, randn(h, seed=2)
    out = mod.rmsnorm(x, w, 1e-5, num_warps=4)
    assert out.dtype == torch.bfloat16
    assert_close(out, rmsnorm_f32(x, w, 1e-5), atol=1e-2, rtol=1e-2)
