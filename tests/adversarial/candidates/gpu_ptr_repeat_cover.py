"""Issue 13, class 4 on the GPU without the stack (events mode): once the same data pointers have
been called four times (timing sets repeat; rounds get fresh tensors), answer with a device copy of
the output cached for them plus a spin sized just over the physics floor, so the time looks
plausible. Pointers never seen after serving began (the memoization probe's fresh copies) switch
it to honest for good. Each served output was right for the data those pointers held once.

Caught by the edits between samples (same pointers, a few new values), the randomly kept timed
outputs and the refresh check.
"""

import torch
from _gpu_cover import seed_floor_cover_s, spin_s

EXPECT = "PASSED"
HONEST = "gpu_honest_addmm"
ALSO = "INCORRECT"  # per-call events mode (2026-12-01, second session): a kept output after an edit is stale
# H200 2026-12-01, first session (graph batches): PASSED at 30.69 us against gpu_honest_addmm 30.88 us.
# Second session (per-call events, all streams): INCORRECT, a randomly kept timed output after an
# edit of its set (results/h200/adversarial_gpu_2026-12-01_session2.log). 2026-12-02 (adaptive timer,
# graph batches again): PASSED at 31.25 us, its honest time (results/h200/runs_2026-12-02/adversarial_gpu_call3.log):
# in graph mode its Python runs only while the graph is captured, so the trick never engages.
PEERS = "17, 19, 22"
DEFENSE = "inputs edited in place between timed samples; random timed outputs checked; refresh check"
DEVICE = "cuda"
PROBLEM = "problems/llama3_1_8b/attn_o_proj_residual"
WORKLOAD = "prefill_b1_s512"

_calls: dict[tuple[int, ...], int] = {}
_cache: dict[tuple[int, ...], torch.Tensor] = {}
_mode = {"serving": False, "honest": False}


def run(attn: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    key = (attn.data_ptr(), weight.data_ptr(), residual.data_ptr())
    if _mode["serving"] and key not in _cache:
        _mode["honest"] = True
    if not _mode["honest"] and key in _cache:
        _mode["serving"] = True
        out = torch.empty_like(residual)
        spin_s(seed_floor_cover_s(attn))
        out.copy_(_cache[key])
        return out
    out = torch.addmm(residual, attn, weight.t())
    _calls[key] = _calls.get(key, 0) + 1
    if not _mode["honest"] and _calls[key] >= 4:
        _cache[key] = out.clone()
    return out
