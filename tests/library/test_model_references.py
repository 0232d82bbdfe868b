"""The non-LLM model problems (FLUX, SD UNets, ViT, Whisper, BERT, Mamba-2) and the backward problems.

For each: the reference agrees with an independent float64 computation (a different formulation:
autograd, complex rotation, explicit shifts), a plausible wrong kernel fails the tolerance, and
FLOPs match FlopCounterMode where it can see the work (SDPA through the math backend, backward
matmuls and convolutions, which the generic library test skips).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from solbench.data.problem import Problem, load_problem
from solbench.engine.problem_code import load_module, load_reference, make_inputs

PROBLEMS = Path(__file__).resolve().parents[2] / "problems"
Outputs = tuple[torch.Tensor, ...]


def _case(rel: str) -> tuple[Problem, dict, Outputs]:
    problem = load_problem(PROBLEMS / rel)
    inputs = make_inputs(problem, problem.test_axes_resolved(), seed=7, device="cpu")
    out = load_reference(problem)(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs.values()])
    return problem, inputs, out if isinstance(out, tuple) else (out,)


def _within(problem: Problem, got: Outputs, ref: Outputs) -> bool:
    tol = problem.tolerance
    return all(bool(((g.double() - r.double()).abs() <= tol.atol + tol.rtol * r.double().abs()).all())
               for g, r in zip(got, ref, strict=True))


def _d(t: torch.Tensor) -> torch.Tensor:
    return t.double()


# --- independent float64 computations ---------------------------------------------------------

def _attention64(i: dict) -> Outputs:
    q, k, v = _d(i["q"]), _d(i["k"]), _d(i["v"])
    return (torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v,)


def _rope64(i: dict) -> Outputs:
    # Complex rotation of interleaved pairs; pair j of axis a turns by ids[:, a] * 10000^(-2j/dim_a).
    omegas = [10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d) for d in (16, 56, 56)]
    axis_of_pair = torch.cat([torch.full((len(o),), a) for a, o in enumerate(omegas)])
    angle = _d(i["ids"])[:, axis_of_pair] * torch.cat(omegas)
    rot = torch.polar(torch.ones_like(angle), angle)
    return tuple(torch.view_as_real(torch.view_as_complex(_d(i[n]).reshape(*i[n].shape[:-1], -1, 2)) * rot)
                 .reshape(i[n].shape) for n in ("q", "k"))


def _attention_backward64(i: dict) -> Outputs:
    q, k, v = (_d(i[n]).requires_grad_(True) for n in "qkv")
    out = F.scaled_dot_product_attention(q, k, v)
    return torch.autograd.grad(out, (q, k, v), _d(i["grad_out"]))


def _conv3x3_shifts64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """NCHW 3x3 'same' cross-correlation as a sum of nine shifted channel contractions."""
    h, wd = x.shape[-2:]
    xp = F.pad(x, (1, 1, 1, 1))
    return sum(torch.einsum("nchw,oc->nohw", xp[..., a:a + h, b:b + wd], w[:, :, a, b])
               for a in range(3) for b in range(3))


def _conv_nhwc64(i: dict) -> Outputs:
    x, w = _d(i["x"]).permute(0, 3, 1, 2), _d(i["weight"]).permute(0, 3, 1, 2)
    return ((_conv3x3_shifts64(x, w) + _d(i["bias"])[:, None, None]).permute(0, 2, 3, 1),)


def _conv_wgrad64(i: dict) -> Outputs:
    x, g = _d(i["x"]), _d(i["grad_out"])
    w = torch.zeros(g.shape[1], x.shape[1], 3, 3, dtype=torch.float64, requires_grad=True)
    return torch.autograd.grad(F.conv2d(x, w, padding=1), w, g)


def _layernorm_backward64(i: dict) -> Outputs:
    x, w = _d(i["x"]).requires_grad_(True), _d(i["weight"]).requires_grad_(True)
    b = torch.zeros_like(w, requires_grad=True)
    out = F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-12)
    return torch.autograd.grad(out, (x, w, b), _d(i["grad_out"]))


def _masked_softmax64(i: dict) -> Outputs:
    scores, lengths = _d(i["scores"]) * i["scale"], i["mask"].sum(dim=-1)
    probs = torch.zeros_like(scores)
    for b, n in enumerate(lengths.tolist()):
        probs[b, ..., :n] = torch.softmax(scores[b, ..., :n], dim=-1)
    return (probs,)


def _ssm_step64(i: dict) -> Outputs:
    state, x, y = _d(i["state"]).clone(), _d(i["x"]), torch.empty(i["x"].shape, dtype=torch.float64)
    dt = F.softplus(_d(i["dt"]) + _d(i["dt_bias"]))
    b, c = _d(i["B"])[:, 0], _d(i["C"])[:, 0]  # ngroups = 1
    for h in range(state.shape[1]):  # one head at a time, as the recurrence is written
        decay = torch.exp(dt[:, h] * _d(i["A"])[h])[:, None, None]
        state[:, h] = state[:, h] * decay + torch.einsum("b,bp,bn->bpn", dt[:, h], x[:, h], b)
        y[:, h] = (state[:, h] @ c[:, :, None])[..., 0] + _d(i["D"])[h] * x[:, h]
    return y, state


def _causal_conv64(i: dict) -> Outputs:
    x, w = _d(i["x"]), _d(i["weight"])
    width = w.shape[1]
    xp = F.pad(x, (0, 0, width - 1, 0))  # zeros before the first token
    out = sum(xp[:, j:j + x.shape[1]] * w[:, j] for j in range(width)) + _d(i["bias"])
    return (F.silu(out),)


def _ln64(x: torch.Tensor, w: torch.Tensor | None, b: torch.Tensor | None, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


INDEPENDENT: dict[str, Callable[[dict], Outputs]] = {
    "flux1_dev/joint_attention": _attention64,
    "flux1_dev/rope_qk": _rope64,
    "flux1_dev/adaln_modulate": lambda i: (_ln64(_d(i["x"]), None, None, i["eps"]) * (1 + _d(i["scale"])[:, None])
                                           + _d(i["shift"])[:, None],),
    "flux1_dev/mlp_fc1_gelu": lambda i: (F.gelu(F.linear(_d(i["x"]), _d(i["weight"]), _d(i["bias"])),
                                                approximate="tanh"),),
    "flux1_dev/attention_backward": _attention_backward64,
    "sdxl_unet/conv3x3_nhwc": _conv_nhwc64,
    "sdxl_unet/groupnorm_silu": lambda i: (F.silu(F.group_norm(_d(i["x"]), i["num_groups"], _d(i["weight"]),
                                                               _d(i["bias"]), i["eps"])),),
    "sd15_unet/conv3x3": lambda i: (_conv3x3_shifts64(_d(i["x"]), _d(i["weight"])) + _d(i["bias"])[:, None, None],),
    "sd15_unet/conv3x3_weight_grad": _conv_wgrad64,
    "vit_l16/patch_embed": lambda i: (F.conv2d(_d(i["pixels"]), _d(i["weight"]), _d(i["bias"]), stride=16)
                                      .flatten(2).transpose(1, 2),),
    "vit_l16/mlp_fc1_gelu": lambda i: (F.gelu(F.linear(_d(i["x"]), _d(i["weight"]), _d(i["bias"]))),),
    "vit_l16/layernorm": lambda i: (_ln64(_d(i["x"]), _d(i["weight"]), _d(i["bias"]), i["eps"]),),
    "vit_l16/layernorm_backward": _layernorm_backward64,
    "whisper_large_v3/encoder_conv_stem": lambda i: (F.gelu(F.conv1d(
        F.gelu(F.conv1d(_d(i["mel"]), _d(i["w1"]), _d(i["b1"]), padding=1)), _d(i["w2"]), _d(i["b2"]),
        stride=2, padding=1)).transpose(1, 2),),
    "bert_base/attn_softmax_mask": _masked_softmax64,
    "bert_base/residual_layernorm": lambda i: (_ln64(_d(i["x"]) + _d(i["residual"]), _d(i["weight"]),
                                                     _d(i["bias"]), i["eps"]),),
    "mamba2_2_7b/ssm_decode_step": _ssm_step64,
    "mamba2_2_7b/causal_conv1d": _causal_conv64,
}


@pytest.mark.parametrize("rel", sorted(INDEPENDENT))
def test_reference_matches_independent_float64(rel: str):
    problem, inputs, ref = _case(rel)
    expected = INDEPENDENT[rel]({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    assert _within(problem, ref, expected), f"{rel}: reference disagrees with the float64 computation"


# --- plausible wrong kernels must fail the tolerance ------------------------------------------

def _rope_rotate_half(i: dict) -> Outputs:
    # Llama-style "rotate half" pairing (x[j], x[j + D/2]) instead of FLUX's interleaved pairs.
    ref = load_module(PROBLEMS / "flux1_dev/rope_qk/reference.py", "ref").rope_angles(i["ids"])
    cos, sin = ref.cos().float(), ref.sin().float()
    out = []
    for n in ("q", "k"):
        x1, x2 = i[n].float().chunk(2, dim=-1)
        out.append(torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1))
    return tuple(out)


def _attention_backward_no_delta(i: dict) -> Outputs:
    # Forgets the rowsum(dO * O) term of dS = P * (dP - Delta).
    q, k, v, do = (_d(i[n]) for n in ("q", "k", "v", "grad_out"))
    scale = 1 / math.sqrt(q.shape[-1])
    p = torch.exp(q @ k.transpose(-1, -2) * scale - _d(i["lse"])[..., None])
    ds = p * (do @ v.transpose(-1, -2))
    return ds @ k * scale, ds.transpose(-1, -2) @ q * scale, p.transpose(-1, -2) @ do


def _layernorm_backward_no_projection(i: dict) -> Outputs:
    # grad_x without the xhat * mean(g * xhat) term.
    dy, xhat = _d(i["grad_out"]), (_d(i["x"]) - _d(i["mean"])[..., None]) * _d(i["rstd"])[..., None]
    g = dy * _d(i["weight"])
    grad_x = _d(i["rstd"])[..., None] * (g - g.mean(-1, keepdim=True))
    return grad_x, (dy * xhat).sum((0, 1)), dy.sum((0, 1))


def _ssm_y_from_old_state(i: dict) -> Outputs:
    y, state = _ssm_step64(i)
    stale = torch.einsum("bhpn,bn->bhp", _d(i["state"]), _d(i["C"])[:, 0]) + _d(i["D"])[:, None] * _d(i["x"])
    return stale, state


WRONG: dict[str, tuple[str, Callable[[dict], Outputs]]] = {
    "flux1_dev/joint_attention": ("no 1/sqrt(D) scale", lambda i: (F.scaled_dot_product_attention(
        i["q"].float(), i["k"].float(), i["v"].float(), scale=1.0),)),
    "flux1_dev/rope_qk": ("rotate-half pairing", _rope_rotate_half),
    "flux1_dev/adaln_modulate": ("scale instead of 1 + scale", lambda i: (
        _ln64(_d(i["x"]), None, None, i["eps"]) * _d(i["scale"])[:, None] + _d(i["shift"])[:, None],)),
    "flux1_dev/mlp_fc1_gelu": ("bias dropped", lambda i: (F.gelu(F.linear(_d(i["x"]), _d(i["weight"])),
                                                                 approximate="tanh"),)),
    "flux1_dev/attention_backward": ("Delta term dropped", _attention_backward_no_delta),
    "sdxl_unet/conv3x3_nhwc": ("weight read as KCRS", lambda i: (F.conv2d(
        _d(i["x"]).permute(0, 3, 1, 2), _d(i["weight"]).reshape(i["weight"].shape[0], -1, 3, 3), _d(i["bias"]),
        padding=1).permute(0, 2, 3, 1),)),
    "sdxl_unet/groupnorm_silu": ("one group", lambda i: (F.silu(F.group_norm(
        _d(i["x"]), 1, _d(i["weight"]), _d(i["bias"]), i["eps"])),)),
    "sd15_unet/conv3x3": ("convolution (flipped kernel)", lambda i: (F.conv2d(
        _d(i["x"]), _d(i["weight"]).flip(-1, -2), _d(i["bias"]), padding=1),)),
    "sd15_unet/conv3x3_weight_grad": ("flipped taps", lambda i: (_conv_wgrad64(i)[0].flip(-1, -2),)),
    "vit_l16/patch_embed": ("patches transposed", lambda i: (F.conv2d(
        _d(i["pixels"]).transpose(-1, -2), _d(i["weight"]), _d(i["bias"]), stride=16).flatten(2).transpose(1, 2),)),
    "vit_l16/mlp_fc1_gelu": ("bias dropped", lambda i: (F.gelu(F.linear(_d(i["x"]), _d(i["weight"]))),)),
    "vit_l16/layernorm": ("no affine weight", lambda i: (_ln64(_d(i["x"]), None, _d(i["bias"]), i["eps"]),)),
    "vit_l16/layernorm_backward": ("projection term dropped", _layernorm_backward_no_projection),
    "whisper_large_v3/encoder_conv_stem": ("first GELU dropped", lambda i: (F.gelu(F.conv1d(
        F.conv1d(_d(i["mel"]), _d(i["w1"]), _d(i["b1"]), padding=1), _d(i["w2"]), _d(i["b2"]),
        stride=2, padding=1)).transpose(1, 2),)),
    "bert_base/attn_softmax_mask": ("mask ignored", lambda i: (torch.softmax(_d(i["scores"]) * i["scale"], -1),)),
    "bert_base/residual_layernorm": ("residual not added", lambda i: (_ln64(
        _d(i["x"]), _d(i["weight"]), _d(i["bias"]), i["eps"]),)),
    "mamba2_2_7b/ssm_decode_step": ("y from the old state", _ssm_y_from_old_state),
    "mamba2_2_7b/causal_conv1d": ("taps reversed", lambda i: _causal_conv64({**i, "weight": i["weight"].flip(-1)})),
}


def test_every_problem_has_both_checks():
    assert set(WRONG) == set(INDEPENDENT)


@pytest.mark.parametrize("rel", sorted(WRONG))
def test_wrong_kernel_fails_tolerance(rel: str):
    problem, inputs, ref = _case(rel)
    what, wrong = WRONG[rel]
    got = wrong({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    assert not _within(problem, got, ref), f"{rel}: a kernel with '{what}' passes the tolerance"


# --- FLOPs where the generic library test cannot count them -----------------------------------

def _count(fn: Callable[[], object]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_joint_attention_flops_match_sdpa_math_backend():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    problem, inputs, _ = _case("flux1_dev/joint_attention")
    with sdpa_kernel(SDPBackend.MATH):  # decomposes into bmm's the counter sees
        counted = _count(lambda: load_reference(problem)(*inputs.values()))
    assert counted == problem.flops_for(problem.test_axes_resolved())


def test_attention_backward_flops_are_2_5x_forward():
    problem, inputs, _ = _case("flux1_dev/attention_backward")
    declared = problem.flops_for(problem.test_axes_resolved())
    assert _count(lambda: load_reference(problem)(*inputs.values())) == declared  # five S x S x D matmuls
    q, k, v = (inputs[n].float() for n in "qkv")
    forward = _count(lambda: (torch.softmax(q @ k.transpose(-1, -2), -1) @ v))
    assert declared == 2.5 * forward


def test_conv_weight_grad_flops_match_convolution_backward():
    problem, inputs, _ = _case("sd15_unet/conv3x3_weight_grad")
    declared = problem.flops_for(problem.test_axes_resolved())
    eager = load_module(problem.folder / "solutions" / "torch_eager.py", "cand").run
    assert _count(lambda: eager(*inputs.values())) == declared  # aten.convolution_backward, wgrad only
    assert _count(lambda: load_reference(problem)(*inputs.values())) == declared  # the im2col GEMMs


def test_ssm_step_leaves_the_old_state_alone():
    """The step writes the new state to its own output (repeated timed calls stay checkable)."""
    problem, inputs, (_, state_out) = _case("mamba2_2_7b/ssm_decode_step")
    state = inputs["state"].clone()
    new_state = load_reference(problem)(state, *list(inputs.values())[1:])[1]
    assert torch.equal(state, inputs["state"])
    assert new_state.data_ptr() != state.data_ptr()
    assert not torch.equal(new_state, state)
