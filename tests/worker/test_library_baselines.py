"""Library baselines (``REQUIRES``) and ``.cu`` candidates on a machine without the library or a CUDA toolchain."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from solbench.worker.candidate import missing_requirements, shipped_candidates
from solbench.worker.cuda_source import extension_name, first_error_line

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "problems" / "llama3_1_8b"
LIGER = sorted((ROOT / "problems").glob("*/*/solutions/lib_liger_*.py"))
HAVE_LIGER = importlib.util.find_spec("liger_kernel") is not None


def _problem_id(path: Path) -> str:
    return f"{path.parents[2].name}.{path.parents[1].name}"


def test_liger_baselines_ship_for_the_llama_ops_and_their_kin():
    assert {_problem_id(p) for p in LIGER} >= {
        *(f"llama3_1_8b.{op}" for op in ("rmsnorm", "fused_add_rmsnorm", "rope", "swiglu", "gate_up_swiglu",
                                         "cross_entropy")),
        "qwen3_30b_a3b.rmsnorm", "mistral_7b.fused_add_rmsnorm", "vit_l16.layernorm", "phi3_mini.gate_up_swiglu",
        "llama4_scout.shared_expert_gate_up_swiglu", "gemma2_9b.gelu_tanh_mul"}


def test_a_shipped_run_says_which_candidate_it_skips_and_why(tmp_path):
    from solbench.api import plan_run

    folder = tmp_path / "scaled_add"
    shutil.copytree(ROOT / "tests" / "fixtures" / "tiny" / "scaled_add", folder)
    (folder / "solutions").mkdir()
    (folder / "solutions" / "plain.py").write_text("def run(x, y):\n    return x * 2 + y\n")
    (folder / "solutions" / "needs_lib.py").write_text(
        'import no_such_kernel_lib\n\nREQUIRES = ["no_such_kernel_lib"]\n\n\ndef run(x, y):\n    return x\n')
    lines: list[str] = []
    (item,) = plan_run([folder], log=lines.append)
    assert [c.path.name for c in item.candidates] == ["plain.py"]
    assert lines == ["skipped: tiny.scaled_add needs_lib.py: needs no_such_kernel_lib, not installed here "
                     "(install it to run this candidate)"]
    lines.clear()
    plan_run([folder], [folder / "solutions" / "plain.py"], log=lines.append)
    assert lines == []  # only the problem's own candidates are skipped: a given file is run (and fails)


@pytest.mark.skipif(HAVE_LIGER, reason="liger_kernel is installed here")
def test_liger_baselines_are_skipped_without_liger(tmp_path):
    for p in LIGER:
        assert missing_requirements(p) == ["liger_kernel"]
        assert p not in shipped_candidates(p.parent.parent)
    # given explicitly, the missing library is a one-line COMPILE_ERROR, never a traceback
    cli = subprocess.run([sys.executable, "-m", "solbench", "run", "llama3_1_8b.rmsnorm", "--small", "--device", "cpu",
                          "-s", str(LLAMA / "rmsnorm" / "solutions" / "lib_liger_rmsnorm.py"), "-q", "--json",
                          "-o", str(tmp_path / "r.jsonl")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "Traceback" not in cli.stderr and cli.returncode == 1
    assert '"status": "COMPILE_ERROR"' in cli.stdout and "No module named 'liger_kernel'" in cli.stdout


def test_cu_build_is_named_by_content_and_reports_the_first_error_line():
    assert extension_name(b"a") == extension_name(b"a") != extension_name(b"b")
    build = "/" + "/".join(("builds", "w", "work"))  # a worker's build folder, as nvcc names it
    log = (f"[1/2] /usr/local/cuda/bin/nvcc -c {build}/kernel.cu -o kernel.cuda.o\n"
           "FAILED: kernel.cuda.o\n"
           f"{build}/kernel.cu(12): error: identifier \"blockIdxx\" is undefined\n"
           f"{build}/kernel.cu(13): error: expected a \";\"\n"
           f"2 errors detected in the compilation of \"{build}/kernel.cu\".\n"
           "ninja: build stopped: subcommand failed.\n")
    assert first_error_line(log) == 'kernel.cu(12): error: identifier "blockIdxx" is undefined'
    assert first_error_line("x.cpp:3:1: fatal error: nothing.h: No such file or directory") \
        == "x.cpp:3:1: fatal error: nothing.h: No such file or directory"


# The Python-level contract of liger_kernel 0.8.5's ops, as its source states it (signatures, layouts, what
# is written in place), in plain torch: the wrappers' argument order and layout handling are checked here;
# Liger's kernels themselves run on the H200 (scripts/h200_session.sh, step liger).
_FAKE_LIGER = {
    "ops/rms_norm.py": """
import torch
class LigerRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None):
        assert casting_mode == "llama" and offset == 0.0
        xf = X.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(X.dtype) * (W + offset)
""",
    "ops/fused_add_rms_norm.py": """
import torch
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
class LigerFusedAddRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, R, W, eps, offset=0.0, casting_mode="llama", in_place=False):
        S = X + R
        return LigerRMSNormFunction.forward(ctx, S, W, eps, offset, casting_mode), S
""",
    "ops/swiglu.py": """
import torch
class LigerFusedGateUpSiLUMulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, in_place=False):
        gate, up = y.contiguous().chunk(2, -1)
        return torch.nn.functional.silu(gate.float()).to(up.dtype) * up
""",
    "ops/rope.py": """
import torch
class LigerRopeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, cos, sin, position_ids=None, unsqueeze_dim=1, rotary_dim=None):
        if cos.ndim == 2:
            cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
        q, k = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()  # [B, S, H, D]: rotated in place
        for t in (q, k):
            c, s, half = cos.unsqueeze(2), sin.unsqueeze(2), t.shape[-1] // 2
            rotated = torch.cat((-t[..., half:], t[..., :half]), -1)
            t.copy_(t * c + rotated * s)
        return q.transpose(1, 2), k.transpose(1, 2)
""",
    "ops/layer_norm.py": """
import torch
class LigerLayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, W, B, eps):
        xf = X.contiguous().float()  # mean, biased variance and the affine in float32, one rounding
        centered = xf - xf.mean(-1, keepdim=True)
        rstd = torch.rsqrt(centered.pow(2).mean(-1, keepdim=True) + eps)
        return (centered * rstd * W.float() + B.float()).to(X.dtype)
""",
    "ops/geglu.py": """
import math
import torch
class LigerGELUMulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = a.contiguous(), b.contiguous()  # its ensure_contiguous: the kernel reads both with one row stride
        af = a.float()
        gelu = 0.5 * af * (1 + torch.tanh(math.sqrt(2 / math.pi) * (af + 0.044715 * af ** 3)))
        return gelu.to(b.dtype) * b
""",
}


@pytest.mark.skipif(HAVE_LIGER, reason="liger_kernel is installed here: the real one is not replaced")
@pytest.mark.parametrize("path", [p for p in LIGER if p.name != "lib_liger_cross_entropy.py"], ids=_problem_id)
def test_liger_wrappers_follow_the_libraries_calling_conventions(tmp_path, monkeypatch, path):
    import torch

    from solbench.data.problem import load_problem
    from solbench.data.small import small_problem
    from solbench.engine.problem_code import load_reference, make_inputs
    from solbench.worker.candidate import load_entry_points

    for rel, text in {"__init__.py": "", "ops/__init__.py": "", **_FAKE_LIGER}.items():
        (tmp_path / "liger_kernel" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "liger_kernel" / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    problem = small_problem(load_problem(path.parents[1]))
    axes = problem.resolve_axes(problem.workloads[0])
    inputs = make_inputs(problem, axes, 5)
    before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    run, _ = load_entry_points(path)
    got = run(*inputs.values())
    want = load_reference(problem)(*inputs.values())
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        tol = problem.tolerance
        torch.testing.assert_close(g.float(), w.float(), atol=tol.atol, rtol=tol.rtol)
    assert all(torch.equal(inputs[k], v) for k, v in before.items())  # no input written (Liger's RoPE is in place)
    for name in [m for m in sys.modules if m.startswith("liger_kernel")]:
        monkeypatch.delitem(sys.modules, name)
