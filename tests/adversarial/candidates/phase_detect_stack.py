"""Exploit #19 (peers.md): phase detection by inspecting the caller.

Walks its callers; when one belongs to a timing module (``solbench.timing``, its CUDA loop) or is
named like a timing loop, it is being timed and returns ``torch.empty`` at once; otherwise
(correctness rounds) it computes honestly. It used to be caught because the timed outputs are
checked (INCORRECT); now every phase reaches ``run`` through the same frames
(solbench.timing.drive, which it skips: every phase has it), it never finds a timing frame and computes honestly throughout
(HONEST: timed as the honest GEMM).
"""

import sys

import torch

EXPECT = "PASSED"
HONEST = "honest_addmm"
PEERS = "19"
DEFENSE = "one call path for every phase (nothing timing-like above run); outputs of timed calls re-checked"
DEVICE = "any"


def _being_timed() -> bool:
    frame = sys._getframe(2)  # the caller of run()
    while frame is not None:
        module, function = frame.f_globals.get("__name__", ""), frame.f_code.co_name
        timing_like = "timing" in module or function in ("time_calls", "do_bench", "benchmark", "timeit")
        if timing_like and function != "drive":  # drive: the call path of every phase, no sign of timing
            return True
        frame = frame.f_back
    return False


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if _being_timed():
        return torch.empty_like(residual)
    return torch.addmm(residual, attn, weight.t())
