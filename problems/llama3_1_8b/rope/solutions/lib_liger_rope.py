"""Liger-Kernel's RoPE (Triton), as a library baseline. Needs liger_kernel (skipped when absent).

LigerRopeFunction (liger_kernel 0.8.5) takes q and k as [batch, heads, seq, head_dim] views, turns them
back to [batch, seq, heads, head_dim] (``transpose(1, 2).contiguous()``, a no-op when that is their
storage) and rotates that storage in place. This problem's [tokens, heads, head_dim] is that storage
with batch 1, so one clone per tensor (inputs must not be mutated) is the only copy: the clone is part
of this baseline's time (the issue's "copying"). cos and sin [tokens, head_dim] are taken as they are.
"""

import torch
from liger_kernel.ops.rope import LigerRopeFunction

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q4 = q.clone().unsqueeze(0).transpose(1, 2)  # [1, HQ, T, D] view of a [1, T, HQ, D] copy
    k4 = k.clone().unsqueeze(0).transpose(1, 2)
    q_out, k_out = LigerRopeFunction.apply(q4, k4, cos, sin)
    return q_out.transpose(1, 2).squeeze(0), k_out.transpose(1, 2).squeeze(0)
