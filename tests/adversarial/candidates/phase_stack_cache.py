"""Issue 13, class 4: phase detection by the call stack, done carefully. When a caller belongs to a
timing module, serve the output cached for this set (keyed by the inputs' data pointers, filled
by the first timed call of each set, which computes); everywhere else (correctness rounds, the
memoization probe) compute honestly. Every output it returns is right for the inputs it was first
computed for, so re-checking the last timed output of each set passes; on the CPU this passed at
1/145 of the honest time. A short busy wait keeps the cached calls above the physics floor (the
CPU roofline's T_ideal for the fixture is under 2 us).

Now every call of ``run`` (rounds, timed calls, the memoization probe) is made from the same
place (solbench.timing.drive, which it skips: every phase has it), and the timing loop's frames
are suspended generators, not callers: no other caller belongs to solbench.timing, the cache is
never used, and it is timed as the
honest GEMM it then is (HONEST). Had it found the loop, the edits between samples and the refresh
check would catch the stale outputs (phase_ptr_repeat_cache).
"""

import sys
import time

import torch

EXPECT = "PASSED"
HONEST = "honest_addmm"
PEERS = "19, 22"
DEFENSE = "one call path for every phase (no timing frame above run); inputs edited between samples"
DEVICE = "any"

_cache: dict[tuple[int, ...], torch.Tensor] = {}


def _being_timed() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        in_timing = frame.f_globals.get("__name__", "").startswith("solbench.timing")
        if in_timing and frame.f_code.co_name != "drive":  # drive: the call path of every phase
            return True
        frame = frame.f_back
    return False


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if not _being_timed():
        return torch.addmm(residual, attn, weight.t())
    key = (attn.data_ptr(), weight.data_ptr(), residual.data_ptr())
    if key not in _cache:
        _cache[key] = torch.addmm(residual, attn, weight.t())
    t_end = time.perf_counter() + 5e-6
    while time.perf_counter() < t_end:
        pass
    return _cache[key]
