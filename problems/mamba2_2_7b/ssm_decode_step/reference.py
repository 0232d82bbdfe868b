"""Reference: Mamba-2 selective state update (mamba_ssm selective_state_update_ref), float32 math."""

import math

import torch
import torch.nn.functional as F


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    nheads = axes["nheads"]

    def uniform(lo: float, hi: float) -> torch.Tensor:
        return torch.rand(nheads, generator=generator, device=device) * (hi - lo) + lo

    # Mamba2's initialisation: A = -exp(A_log) with A in [-16, -1]; dt_bias = softplus^-1(dt) for
    # dt log-uniform in [0.001, 0.1]; D = 1. D is perturbed so that a kernel ignoring it fails.
    a = -torch.exp(uniform(math.log(1.0), math.log(16.0)))
    dt0 = torch.exp(uniform(math.log(1e-3), math.log(1e-1)))
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))
    d = 1.0 + 0.5 * torch.randn(nheads, generator=generator, device=device)
    return {"A": a, "dt_bias": dt_bias, "D": d}


def run(state: torch.Tensor, x: torch.Tensor, dt: torch.Tensor, dt_bias: torch.Tensor, A: torch.Tensor,
        B: torch.Tensor, C: torch.Tensor, D: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    nheads, ngroups = state.shape[1], B.shape[1]
    dt = F.softplus(dt.float() + dt_bias)  # [batch, nheads]
    decay = torch.exp(dt * A)[..., None, None]  # [batch, nheads, 1, 1]
    b = B.float().repeat_interleave(nheads // ngroups, dim=1)  # [batch, nheads, dstate]
    c = C.float().repeat_interleave(nheads // ngroups, dim=1)
    xf = x.float()
    new_state = state * decay + (dt[..., None] * xf)[..., None] * b[:, :, None, :]
    # A multiply and a sum rather than an einsum: FlopCounterMode would count a bmm's 2 FLOPs per
    # state element as the whole step's work (solbench validate --deep compares them).
    y = (new_state * c[:, :, None, :]).sum(dim=-1) + D[:, None] * xf
    return y.to(x.dtype), new_state
