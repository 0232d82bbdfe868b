"""PyTorch's torch._grouped_mm for the routed experts (as torchtitan's MoE runs them): the routed rows sorted by
expert, one grouped GEMM for gate and up, SiLU and multiply, one grouped GEMM for down, then the weighted
combine onto the residual in float32. A library baseline."""

import torch
import torch.nn.functional as F

BASELINE = "torch"  # read by solbench (never imported): the record names the library and its version


def run(x, residual, w13, w2, topk_weights, topk_ids):
    k = topk_ids.shape[1]
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True)  # routed rows (token, slot) in expert order
    offsets = torch.bincount(flat, minlength=w13.shape[0]).cumsum(0).to(torch.int32)  # group ends
    tokens = order // k
    gate, up = torch._grouped_mm(x[tokens], w13.transpose(1, 2), offs=offsets).chunk(2, dim=-1)  # [T*K, F] each
    down = torch._grouped_mm(F.silu(gate) * up, w2.transpose(1, 2), offs=offsets)  # [T*K, H]
    weighted = down.float() * topk_weights.reshape(-1)[order, None]
    return residual.float().index_add_(0, tokens, weighted).to(x.dtype)
