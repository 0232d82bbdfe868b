"""quack's cross-entropy (CuTe DSL), as a library baseline. Needs quack (quack-kernels; skipped when absent).

quack keeps this problem's contract as it is: its per-token loss is float32 (logsumexp minus the target
logit, both in float32, whatever the logits' dtype), so no cast is needed. Its default reduction is
"mean": "none" gives the per-token losses. Targets are all in [0, V), so its ignore_index (-100) never
applies.
"""

import torch
from quack import cross_entropy

BASELINE = "quack-kernels"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["quack"]  # read by solbench (never imported) to skip this file when it is not installed


def run(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return cross_entropy(logits, targets, reduction="none")
