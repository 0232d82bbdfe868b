"""Exploit #24, variant: forge the raw samples, leave the reported median and statistics honest.

The parent recomputes every statistic from the raw samples (``solbench.timing.restate``), so the
median it records is a tenth of the real time, though the worker's own summary is honest. The burst
compares the parent-clocked time per call with that recomputed median.
"""

import torch
from _forge import install, scale

EXPECT = "REWARD_HACK"
PEERS = "24"
DEFENSE = "statistics recomputed from the raw samples by the parent, then the parent-clocked burst"
DEVICE = "any"
QUIET = True  # the burst catches it, and concludes nothing beside other runs on the CPU
KNOWN_GAP_CUDA = ("on a GPU the fixture's calls are host-bound (~55 us per call back to back for ~5 us of device work, "
                  "H200 2026-12-02): the burst concludes nothing under 1 ms per call, so a forged claim there is held "
                  "only by the physics floor (docs/security.md)")


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    install(lambda timing: scale(timing, 0.1, fields=()))
    return torch.addmm(residual, attn, weight.t())
