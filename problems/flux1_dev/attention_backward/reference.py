"""Reference: FlashAttention-style backward in float32 from the saved out and lse.

P = exp(q k^T * scale - lse); dV = P^T dO; dP = dO V^T; Delta = rowsum(dO * O);
dS = P * (dP - Delta); dQ = dS K * scale; dK = dS^T Q * scale. Heads are processed in chunks so
the [S, S] float32 matrices stay within a few GB at every workload.
"""

import math

import torch

QK_STD = 1.6  # as in flux1_dev.joint_attention: peaked rows, as after FLUX's QK RMSNorm
CHUNK_ELEMS = 1 << 27  # float32 elements of one [heads, S, S] chunk (512 MiB)


def _chunks(n_heads: int, seq: int) -> list[slice]:
    step = max(1, CHUNK_ELEMS // (seq * seq))
    return [slice(i, min(i + step, n_heads)) for i in range(0, n_heads, step)]


def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 attention output and lse, [B*H, S, D] and [B*H, S]."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    for c in _chunks(q.shape[0], q.shape[1]):
        scores = q[c].float() @ k[c].float().transpose(-1, -2) * scale
        lse[c] = torch.logsumexp(scores, dim=-1)
        out[c] = torch.exp(scores - lse[c][..., None]) @ v[c].float()
    return out, lse


def make_inputs(axes: dict[str, int], generator: torch.Generator, device: str) -> dict[str, torch.Tensor]:
    shape = (axes["B"], axes["H"], axes["S"], axes["D"])

    def draw(std: float) -> torch.Tensor:
        return (torch.randn(shape, generator=generator, device=device) * std).to(torch.bfloat16)

    q, k, v, grad_out = draw(QK_STD), draw(QK_STD), draw(1.0), draw(1.0)
    flat = (-1, axes["S"], axes["D"])
    out, lse = _forward(q.reshape(flat), k.reshape(flat), v.reshape(flat))
    return {"q": q, "k": k, "v": v, "out": out.to(torch.bfloat16).reshape(shape), "grad_out": grad_out,
            "lse": lse.reshape(shape[:-1])}


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, grad_out: torch.Tensor,
        lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    shape, seq, dim = q.shape, q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(dim)
    q, k, v, out, grad_out = (t.reshape(-1, seq, dim) for t in (q, k, v, out, grad_out))
    lse = lse.reshape(-1, seq)
    grads = [torch.empty(q.shape, dtype=torch.float32, device=q.device) for _ in range(3)]
    for c in _chunks(q.shape[0], seq):
        qc, kc, vc, doc = q[c].float(), k[c].float(), v[c].float(), grad_out[c].float()
        p = torch.exp(qc @ kc.transpose(-1, -2) * scale - lse[c][..., None].float())
        grads[2][c] = p.transpose(-1, -2) @ doc
        dp = doc @ vc.transpose(-1, -2)
        delta = (doc * out[c].float()).sum(dim=-1, keepdim=True)
        ds = p * (dp - delta)
        grads[0][c] = ds @ kc * scale
        grads[1][c] = ds.transpose(-1, -2) @ qc * scale
    dq, dk, dv = (g.reshape(shape).to(torch.bfloat16) for g in grads)
    return dq, dk, dv
