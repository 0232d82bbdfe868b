"""Issue 13, class 4, the general stack test: learn the callers of the first call (a correctness
round): module, function and line of every frame above ``run``, and the thread. Any later call
reached another way (a timing loop, a probe) is not a round: serve the output cached for its data
pointers (computed by the first such call). Pointers never seen after serving began switch it to
honest for good (the memoization probe's fresh copies then see honest calls both ways).

Before one call path, the timing loop's frames differed and this PASSED at a fraction of the honest
time. Now every phase calls ``run`` from the same line of the same frames on the same thread:
no call ever differs, and it is timed as the honest GEMM it then is (HONEST).
"""

import sys
import threading
import time

import torch

EXPECT = "PASSED"
HONEST = "honest_addmm"
PEERS = "19, 22"
DEFENSE = "one call path for every phase: the same frames, lines and thread above run"
DEVICE = "any"

_first: list[tuple] = []
_cache: dict[tuple[int, ...], torch.Tensor] = {}
_state = {"serving": False, "honest": False}


def _signature() -> tuple:
    frame, names = sys._getframe(2), []
    while frame is not None:
        names.append((frame.f_globals.get("__name__"), frame.f_code.co_name, frame.f_lineno))
        frame = frame.f_back
    return threading.get_ident(), threading.current_thread().name, tuple(names)


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    sig = _signature()
    if not _first:
        _first.append(sig)
    key = (attn.data_ptr(), weight.data_ptr(), residual.data_ptr())
    if _state["serving"] and key not in _cache:
        _state["honest"] = True
    if _state["honest"] or sig == _first[0]:
        return torch.addmm(residual, attn, weight.t())
    if key in _cache:
        _state["serving"] = True
        t_end = time.perf_counter() + 5e-6  # stay above the physics floor
        while time.perf_counter() < t_end:
            pass
        return _cache[key]
    _cache[key] = torch.addmm(residual, attn, weight.t())
    return _cache[key]
