"""Liger-Kernel's cross-entropy (Triton), as a library baseline. Needs liger_kernel (skipped when absent).

The dtype question: this problem's per-token loss is float32 (what training code accumulates and
scales), while Liger stores the loss in the logits' dtype (bfloat16 here: 8 bits of mantissa, a
relative error up to 2^-9 on every loss). solbench keeps float32 as the contract: this baseline
returns Liger's loss cast to float32, and the check decides whether its bfloat16 rounding is within
the problem's tolerance; a cast cannot restore the lost bits, so a failure is Liger's, reported as
INCORRECT (docs/kernels.md, "Library baselines").
"""

import torch
from liger_kernel.transformers.functional import liger_cross_entropy

BASELINE = "liger-kernel"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["liger_kernel"]  # read by solbench (never imported) to skip this file when it is not installed


def run(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return liger_cross_entropy(logits, targets, reduction="none").float()
