"""The parent-clocked burst: evidence, from outside the worker, that a claimed time is not far below the truth.

Timing runs in the candidate's process, so a candidate can make its worker claim any time above
the physics floor (a forged reply, edited samples). After the timing, the parent asks the same
worker for a burst of ``n`` calls back to back on the timed sets (:mod:`solbench.worker.burst`) and
times the request with its own clock:

* ``n`` is chosen from the claimed time so the burst lasts ``TARGET_S`` of the device (capped: ``MAX_CALLS``, and
  the outputs it keeps within ``OUTPUT_BUDGET_BYTES``);
* before each call the parent's edit overwrites a few elements of one input of the set it runs with
  values from a case drawn for this burst (the candidate has seen none of them), so every call's
  inputs differ from every earlier call's and no output can be served from a cache;
* every call's output comes back; only once the reply is in does the parent choose ``CHECKED_CALLS``
  of them at random (from a seed derived from the run's secret one) and check each against the
  reference for the inputs that call saw. A worker that skips a fraction f of the calls passes with
  probability (1 - f) ** CHECKED_CALLS at most;
* the parent's time per call is ``(wall - rtt) / n``, ``rtt`` the least of ``PINGS`` empty requests
  (at most ``RTT_SHARE`` of the wall time is taken off: a worker cannot buy more by answering pings
  slowly). On the CPU the worker's CPU time and its descendants' (the kernel's count) stand in for
  the wall time where less, and the harness's own work per call (measured here) is taken off (where
  it is more than ``MAX_OVERHEAD_SHARE`` of the time, the burst concludes nothing).
  The claimed time (the median the parent recomputed from the raw samples) is compared with it:
  below ``MIN_RATIO`` of it, the burst is run once more with new edits, and a second miss makes the
  record REWARD_HACK;
* on a GPU each call is followed by a device synchronisation (its work on any stream done before its
  output is kept, as in the rounds and the timing). Below ``GPU_MIN_CALL_S`` per call a call is
  bound by host work the timer rightly leaves out, and nothing is concluded; above it a claim is
  rejected where both the wall time and NVML's reading per call (utilisation x wall / n, which
  resolves an honest kernel's idle gaps at that length) put it below ``MIN_RATIO``.

It bounds the claim by what the worker demonstrably sustains, under the parent's clock, on inputs it
could not predict: a claim can be at most 1 / MIN_RATIO times faster than that (docs/security.md,
"The parent-clocked burst", says what it cannot see). The result goes into the record as
``correctness.burst``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from solbench.data import Status, make_inputs
from solbench.engine.cases import (
    WorkloadCases,
    batch_calls,
    derive_seed,
    reference_outputs,
    reference_outputs_many,
)
from solbench.engine.correctness import MalformedReply, check_outputs
from solbench.engine.verification import TimedPlan, after_timing, apply_edits, edit_count, editable_inputs
from solbench.timing import bit_view

# How long a burst lasts at the claimed time. On a GPU a call concludes only from GPU_MIN_CALL_S up, where
# 10 calls last at least twice MIN_WINDOW_S: a forger whose calls take that long is concluded on as before,
# and a sub-millisecond claim is not run 50 times for nothing (H200 call 25, 2026-12-03: 50 host-bound calls
# took 37 ms of each timing window at the median, and concluded nothing).
TARGET_S = {"cpu": 0.05, "cuda": 0.01}
MIN_CALLS, MAX_CALLS = 4, 20_000
CHECKED_CALLS = 4
PINGS = 5
RTT_SHARE = 0.05
OUTPUT_BUDGET_BYTES = {"cpu": 256 << 20, "cuda": 4 << 30}
# The least claimed / parent-measured ratio an honest candidate shows (measured: docs/security.md).
MIN_RATIO = {"cpu": 0.25, "cuda": 0.25}
OVERHEAD_CALLS = 1000  # calls of the harness's own loop timed in the parent
REPLY_SAMPLE_BYTES = 32 << 20  # the kept outputs copied in the parent to time the CPU reply's copy per call
TRANSPORT_CALLS = 4  # calls' outputs moved through the memfd route to time its share of a GPU burst call
# The most of a burst's time the harness's own work may account for and the burst still conclude:
# beyond it, what is left for the candidate is too small a difference of two noisy figures.
MAX_OVERHEAD_SHARE = 0.75
MIN_WINDOW_S = 0.005
# On the CPU, the most of the worker's cores' time other processes may take during a burst and the
# burst still conclude: a tiny op's threads that spin at a barrier while another process holds one of
# their cores read 10-100x slower back to back than the timing's median shows (measured: one busy
# loop on 2 cores, 2026-12-02), which is the machine's doing, not the candidate's.
MAX_OUTSIDE_SHARE = 0.25
# On a GPU the wall time per call concludes only from this long up: below it an honest call is bound by
# its host work (Python, launches, the harness's edit and copy), which the timer rightly leaves out and
# nothing outside the worker can take off. Measured on the H200 (2026-12-02): honest 5-21 us kernels
# read 30-245 us per call back to back (ratios 0.05-0.14), and NVML's utilisation, which counts any
# kernel in its sampling period, read them as busy as that (0.05-0.13: not a device-busy time).
GPU_MIN_CALL_S = 1e-3
MIN_NVML_SAMPLES = 3  # NVML's utilisation samples a GPU verdict needs (one about every 1/6 s)
GPU_SECOND_BURST_S = 1.0  # a GPU's second burst lasts this long at the first one's pace: enough samples
ATTEMPTS = 2
# After a conclusive failure a burst that concludes nothing (a crowded CPU, NVML seeing too little) does not
# clear it: one more attempt, and without a conclusive pass the failure stands.
MIXED_ATTEMPTS = 3
EDIT_ALIGN = 4096  # at least any transport's alignment of a tensor (the device route's: 512 bytes)

Request = Callable[[dict[str, Any], float, int], dict[str, Any]]


@dataclass
class BurstPlan:
    calls: int
    attempt: int
    edits: dict[str, tuple[Any, Any, Any]]  # input -> (calls [c], flat indices [c, E], values [c, E])


@dataclass
class BurstVerdict:
    status: Status
    reason: str


def claimed_time(timing: dict[str, Any]) -> float:
    """The time a record would carry: the median the parent recomputed from the raw samples
    (:func:`solbench.timing.restate`), never the worker's own summary."""
    return float(timing["median_s"])


def output_bytes(cases: WorkloadCases) -> int:
    return sum(v.numel() * v.element_size() for v in cases.sets[0].expected.values() if hasattr(v, "numel"))


def room_bytes(out_bytes: int, device_type: str) -> int:
    """The most device (or host) memory a first burst keeps for its outputs: its calls at the least
    claimed time they can be chosen for, within the budget (a GPU's rare second burst may keep more)."""
    return min(OUTPUT_BUDGET_BYTES[device_type], call_count(0.0, out_bytes, device_type) * out_bytes)


def call_count(claimed_s: float, out_bytes: int, device_type: str) -> int:
    """Calls that last ``TARGET_S`` at the claimed time, within the caps. On a GPU the time per call is
    taken as at least ``GPU_MIN_CALL_S``: a burst concludes only where a call takes that long, so more
    calls for a shorter claim would lengthen an honest host-bound burst (the device's exclusive window)
    and show nothing more."""
    floor = GPU_MIN_CALL_S if device_type == "cuda" else 1e-9
    want = math.ceil(TARGET_S[device_type] / max(claimed_s, floor))
    room = OUTPUT_BUDGET_BYTES[device_type] // max(out_bytes, 1)
    return max(1, min(max(MIN_CALLS, want), MAX_CALLS, room))


def burst_inputs(cases: WorkloadCases, attempt: int) -> dict[str, Any] | None:
    """The case a burst's edit values are drawn from (the problem's generator may run in its host: device
    work, made before the burst's window), or None when no input can be edited."""
    if not editable_inputs(cases):
        return None
    return make_inputs(cases.problem, cases.axes, derive_seed(cases.verify_seed, "burst", attempt), device=cases.device,
                       generator_fn=cases.generator, scalars=cases.problem.scalars_for(cases.workload))


def draw_burst(cases: WorkloadCases, calls: int, attempt: int, fresh: dict[str, Any] | None = None) -> BurstPlan:
    """One edit before every call, of an input drawn per call, with values of a case drawn for this burst
    (``fresh``: that case made already by :func:`burst_inputs`)."""
    import torch

    names = editable_inputs(cases)
    if not names:
        return BurstPlan(calls, attempt, {})
    seed = derive_seed(cases.verify_seed, "burst", attempt)
    fresh = burst_inputs(cases, attempt) if fresh is None else fresh
    assert fresh is not None
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(derive_seed(seed, "indices"))
    which = [rng.randrange(len(names)) for _ in range(calls)]
    edits = {}
    for k, name in enumerate(names):
        at = torch.tensor([c for c in range(calls) if which[c] == k], dtype=torch.int64)
        if not at.numel():
            continue
        flat = bit_view(fresh[name]).reshape(-1)
        index = torch.randint(flat.numel(), (at.numel(), edit_count(cases, name)), generator=gen, dtype=torch.int64)
        edits[name] = (at, index, flat[index.to(flat.device)].view(fresh[name].dtype))
    return BurstPlan(calls, attempt, edits)


def first_calls(cases: WorkloadCases) -> int:
    """The most calls a GPU's first burst asks for, whatever the claim (the claim's floor is ``GPU_MIN_CALL_S``)."""
    return call_count(0.0, output_bytes(cases), "cuda")


def truncated(bp: BurstPlan, calls: int) -> BurstPlan:
    """The plan's first ``calls`` calls: drawn call by call, so a prefix is a plan of that many calls."""
    edits = {}
    for name, (at, index, values) in bp.edits.items():
        keep = at < calls
        if bool(keep.any()):
            edits[name] = (at[keep], index[keep.to(index.device)], values[keep.to(values.device)])
    return BurstPlan(calls, bp.attempt, edits)


@dataclass
class FirstBurst:
    """The first burst made ready before its timing's window: its case, and on a GPU its plan drawn for
    the most calls a claim can ask for (:func:`first_calls`) with its room made in the worker, so the window
    holds the pings and the calls only (the room's pool grown inside it cost a new shared mapping)."""

    case: dict[str, Any] | None
    plan: BurstPlan | None = None

    def ready(self, calls: int) -> BurstPlan | None:
        """The plan for ``calls`` calls when it was made ready ahead, else None (it is drawn and made room for then)."""
        return truncated(self.plan, calls) if self.plan is not None and calls <= self.plan.calls else None


def first_burst(request: Request, cases: WorkloadCases, expect: list[dict[str, Any]], device_type: str,
                timeout_s: float, room: Callable[[dict[str, Any]], int] | None = None,
                timing_room: int = 0) -> FirstBurst:
    """The first burst's case; on a GPU also its plan and its room (``burst_prepare``), made now, untimed.
    ``room`` sizes a request's device pool (:func:`solbench.worker.pool_bytes`); the room is made for the
    larger of the burst and ``timing_room`` (the timing request's), so neither grows the pool in the window."""
    case = burst_inputs(cases, 0)
    if device_type != "cuda":
        return FirstBurst(case)
    calls = first_calls(cases)
    plan = draw_burst(cases, calls, 0, case)
    header = {"op": "burst_prepare", "calls": calls, "expect": expect,
              "edit_bytes": edit_bytes(burst_request(cases, plan, expect))}
    if room is not None:
        header["reply_room"] = max(room(header), timing_room)
    request(header, timeout_s, 0)
    return FirstBurst(case, plan)


def burst_request(cases: WorkloadCases, bp: BurstPlan, expect: list[dict[str, Any]]) -> dict[str, Any]:
    names = list(cases.sets[0].inputs)
    return {"op": "burst", "calls": bp.calls, "expect": expect,
            "edits": [{"input": names.index(n), "calls": at, "index": ix, "values": v}
                      for n, (at, ix, v) in bp.edits.items()]}


def edit_bytes(header: dict[str, Any]) -> int:
    """Room for a burst request's own tensors (its edits), each rounded up as a transport may place it:
    made by the untimed ``burst_prepare`` before it, so the timed request never grows a transport."""
    sizes = [t.numel() * t.element_size() for e in header.get("edits", ()) for t in (e["calls"], e["index"], e["values"])]
    return sum(-(-n // EDIT_ALIGN) * EDIT_ALIGN for n in sizes)


def _set_edits(bp: BurstPlan, s: int, n_sets: int, upto: int) -> list[tuple[str, Any, Any]]:
    """The edits of plan ``bp`` to set ``s`` at calls up to ``upto``, in call order."""
    edits = []
    for name, (at, index, values) in bp.edits.items():
        for row, c in enumerate(at.tolist()):
            if c <= upto and c % n_sets == s:
                edits.append((c, name, index[row], values[row]))
    return [e[1:] for e in sorted(edits, key=lambda e: e[0])]


def call_inputs(cases: WorkloadCases, plan: TimedPlan, samples: int, bursts: list[BurstPlan], call: int) -> dict[str, Any]:
    """The inputs call ``call`` of the last of ``bursts`` saw: its set as the timing left it, every edit
    of the earlier bursts, then those of this one up to and including this call's, in call order."""
    n_sets = len(cases.sets)
    s = call % n_sets
    edits = [e for bp in bursts[:-1] for e in _set_edits(bp, s, n_sets, bp.calls)]
    edits += _set_edits(bursts[-1], s, n_sets, call)
    return apply_edits(after_timing(cases, plan, samples, s), edits)


def call_outputs(reply: dict[str, Any], calls: int, expect: list[dict[str, Any]],
                 device_type: str) -> Callable[[int], Any]:
    """The outputs of call ``c`` of a burst reply, as a ``call`` reply describes outputs: its row of the
    stacked outputs (the worker copies only exact tensors of the expected shapes and dtypes on its device
    there), or its own description when it was not that."""
    import torch

    stacked, misfits = reply.get("stacked"), reply.get("misfits")
    if not isinstance(misfits, list) or not all(isinstance(m, dict) and isinstance(m.get("call"), int)
                                                and 0 <= m["call"] < calls for m in misfits):
        raise MalformedReply("misfits must be a list of calls and their outputs")
    apart = {m["call"]: m.get("outputs") for m in misfits}
    if stacked is None:
        if len(apart) != calls:
            raise MalformedReply(f"the burst returned outputs of {len(apart)} of its {calls} calls")
    elif not isinstance(stacked, list) or len(stacked) != len(expect) or not all(
            type(t) is torch.Tensor and list(t.shape) == [calls, *e["shape"]] for t, e in zip(stacked, expect, strict=False)):
        raise MalformedReply("the burst's stacked outputs do not have one row per call of the expected shape")

    def outputs(c: int) -> Any:
        if c in apart:
            return apart[c]
        return [{"kind": "tensor", "type": "torch.Tensor", "exact": True, "shape": list(t.shape[1:]),
                 "dtype": e["dtype"], "device": device_type, "contiguous": True, "aliases": [], "data": t[c]}
                for t, e in zip(stacked, expect, strict=True)]

    return outputs


def check_calls(cases: WorkloadCases, plan: TimedPlan, samples: int, bursts: list[BurstPlan],
                outputs: Callable[[int], Any], device_type: str) -> tuple[list[int], BurstVerdict | None]:
    """Check calls of the last burst chosen now, after its reply: (the calls, the first failure or None)."""
    bp = bursts[-1]
    rng = random.Random(derive_seed(cases.verify_seed, "burst-check", bp.attempt))
    chosen = sorted(rng.sample(range(bp.calls), min(CHECKED_CALLS, bp.calls)))
    tol = cases.tolerance
    # The chosen calls' references in one request to the problem host where their inputs are small; else one
    # call at a time, as the record's memory reservation counts.
    at_once = batch_calls(cases.problem, cases.axes) >= len(chosen)
    inputs = [call_inputs(cases, plan, samples, bursts, c) for c in chosen] if at_once else []
    references = reference_outputs_many(cases.problem, cases.axes, cases.reference, inputs) if at_once else []
    for n, c in enumerate(chosen):
        expected = references[n] if at_once else reference_outputs(
            cases.problem, cases.axes, cases.reference, call_inputs(cases, plan, samples, bursts, c))
        check = check_outputs(outputs(c), expected, device_type, tol.atol, tol.rtol, tol.max_mismatch_ratio)
        if not check.passed:
            return chosen, BurstVerdict(Status.INCORRECT, f"burst call {c + 1} of {bp.calls} (checked at random after "
                                                          f"the burst, inputs edited between calls): {check.reason}")
    return chosen, None


def ping(request: Request, timeout_s: float) -> float:
    """The least round trip of ``PINGS`` empty requests, by the parent's clock."""
    best = math.inf
    for _ in range(PINGS):
        t0 = time.perf_counter()
        request({"op": "ping"}, timeout_s, 0)
        best = min(best, time.perf_counter() - t0)
    return best


def _harness_loop(cases: WorkloadCases, bp: BurstPlan, expect: list[dict[str, Any]], m: int,
                  ) -> tuple[Callable[[], None], list[Any]]:
    """The burst's loop over its first ``m`` calls with a candidate that does nothing, on a copy of the
    first set, in this process: only the harness's own work (staging their edits, the loop, the edit,
    keeping the output in its row); and the rows it keeps (:func:`reply_copy` copies from them)."""
    import torch

    from solbench.timing import drive
    from solbench.worker import burst_plan, output_buffers, stage_edits

    names = list(cases.sets[0].inputs)
    edits = [{"input": names.index(n), "calls": at[at < m], "index": ix[at < m], "values": v[at < m]}
             for n, (at, ix, v) in bp.edits.items()]
    sets = [[torch.Tensor.clone(v) if isinstance(v, torch.Tensor) else v for v in cases.sets[0].inputs.values()]]
    buffers = output_buffers(m, expect, cases.device)
    outs = [torch.Tensor.clone(v) for v in cases.sets[0].expected.values()]
    out = outs[0] if len(outs) == 1 else tuple(outs)
    sync = torch.cuda.synchronize if str(cases.device).startswith("cuda") else None

    def loop() -> None:
        # The worker stages every call's edits in the request, before its first call: its share per call.
        drive(burst_plan(sets, m, stage_edits(sets, edits, m), buffers, sync), lambda *args: out)

    return loop, buffers


def reply_copy(rows: list[Any], out_bytes: int, calls: int) -> float:
    """The CPU time per call of the reply's copy of a call's outputs: up to ``REPLY_SAMPLE_BYTES`` of the
    kept ``rows`` copied by one thread here into memory already touched. A reply of ``SHM_MIN_BYTES`` and
    more goes into the shared-memory file the worker faulted in before the burst
    (:func:`solbench.worker.burst.reply_arena`) by one torch copy, over its intra-op threads: memory-bound,
    each as busy as one alone (measured on a 2-core machine 2026-12-02: 11.6 us per 128 KiB row over two
    threads, 5.8 in one), so the one thread's time counts once per thread; a smaller one goes as inline
    frames, one thread's copy into the socket."""
    import torch

    from solbench.worker import SHM_MIN_BYTES

    k = max(1, min(r.shape[0] for r in rows)) if rows else 0
    k = min(k, max(1, REPLY_SAMPLE_BYTES // max(out_bytes, 1)))
    pairs = [(r[:k].reshape(-1).view(torch.uint8), torch.zeros(r[:k].numel() * r.element_size(), dtype=torch.uint8))
             for r in rows if r.numel()]
    if not pairs:
        return 0.0
    views = [(memoryview(dst.numpy()), memoryview(src.numpy())) for src, dst in pairs]
    t0 = time.thread_time()
    for dst, src in views:
        dst[:] = src
    threads = torch.get_num_threads() if calls * out_bytes >= SHM_MIN_BYTES else 1
    return (time.thread_time() - t0) * threads / k


def _untroubled(loop: Callable[[], None]) -> float:
    """This thread's CPU time over ``loop()``, the garbage collector held off: a full collection of this
    process's objects (the parent's, not the worker's) landing in the ``OVERHEAD_CALLS`` sampled calls
    read 30 us a call for a loop of 9 (2026-12-02); in the worker's burst it is spread over all its calls."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.thread_time()
        loop()
        return time.thread_time() - t0
    finally:
        if was:
            gc.enable()


def harness_overhead(cases: WorkloadCases, bp: BurstPlan, expect: list[dict[str, Any]], device_type: str) -> float:
    """The harness's own work per burst call: :func:`_harness_loop` over up to ``OVERHEAD_CALLS`` calls, and
    on the CPU the reply's copy of a call's outputs (:func:`reply_copy`); CPU time on the CPU (the kernel's
    count of the worker's, which :func:`judge` takes), wall time on a GPU (with the reply's copy, as before)."""
    import torch

    m = min(bp.calls, OVERHEAD_CALLS)
    loop, buffers = _harness_loop(cases, bp, expect, m)
    if device_type == "cpu":
        return _untroubled(loop) / m + reply_copy(buffers, output_bytes(cases), bp.calls)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loop()
    for b in buffers:
        torch.Tensor.clone(b)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / m


def transport_overhead(cases: WorkloadCases, calls: int) -> float:
    """On a GPU over the memfd route, the parent-clocked time per burst call that is the reply's transport,
    not the candidate's: ``TRANSPORT_CALLS`` calls' outputs (at most ``calls``) copied from the device into
    a shared-memory file and read back, as the worker's reply carries them. On the device route the outputs
    stay on the device and this is not counted; over memfd an honest candidate's 1.2 GiB of burst outputs
    took 56 ms a call for a 195 us kernel and were judged a reward hack (H200, 2026-12-02)."""
    import socket
    import threading

    from solbench.worker import encode_header, recv_message, send_encoded

    m = max(1, min(calls, TRANSPORT_CALLS))
    outs = [t for t in cases.sets[0].expected.values() if hasattr(t, "numel")] * m
    a, b = socket.socketpair()
    with a, b:
        t0 = time.perf_counter()
        reader = threading.Thread(target=lambda: recv_message(b, time.monotonic() + 120), daemon=True)
        reader.start()  # frames under the memfd threshold go through the socket: read them meanwhile
        send_encoded(a, *encode_header({"outputs": outs}), time.monotonic() + 120)
        reader.join(120)
        return (time.perf_counter() - t0) / m


def judge(claimed_s: float, wall_s: float, rtt_s: float, calls: int, device_type: str,
          cpu_s: float | None = None, overhead_s: float = 0.0, wait_s: float | None = None,
          outside_share: float = 0.0) -> dict[str, Any]:
    """The parent's time per call and how the claim compares with it.

    On the CPU the worker's CPU time (the kernel's count) stands in for the wall time where it is
    less, and so does the wall time less the main thread's run-queue wait (``wait_s``, the kernel's
    count too): a worker that shares its cores with other processes waits through part of a long
    burst, while the claimed median of short samples mostly misses those waits (and the CPU time
    counts the spin of idle pool threads, which the wall time less the wait does not). The harness's own work per
    call (``overhead_s``, :func:`harness_overhead`) is taken off: it is not the candidate's. Where it is
    more than ``MAX_OVERHEAD_SHARE`` of the time, nothing is concluded; nor where other processes took
    more than ``MAX_OUTSIDE_SHARE`` of the worker's cores (``outside_share``, the kernel's count: a
    candidate cannot raise it, whatever it starts is the worker's descendant). On a GPU nothing is
    concluded below ``GPU_MIN_CALL_S`` per call (host-bound calls).
    """
    taken = min(rtt_s, RTT_SHARE * wall_s)
    busy = wall_s - taken
    if device_type == "cpu" and cpu_s is not None and cpu_s > 0:
        busy = min(busy, cpu_s)
    if device_type == "cpu" and wait_s:
        busy = min(busy, max(wall_s - taken - wait_s, 1e-12))
    share = overhead_s * calls / max(busy, 1e-12)
    per_call = max(busy - overhead_s * calls, 1e-12) / calls
    ratio = claimed_s / per_call
    busy_machine = device_type == "cpu" and outside_share > MAX_OUTSIDE_SHARE
    host_bound = device_type == "cuda" and per_call < GPU_MIN_CALL_S
    conclusive = wall_s >= MIN_WINDOW_S and share <= MAX_OVERHEAD_SHARE and not busy_machine and not host_bound
    return {"calls": calls, "wall_s": wall_s, "rtt_s": rtt_s, "overhead_s": overhead_s, "overhead_share": share,
            "outside_share": outside_share, "per_call_s": per_call,
            "ratio": ratio,
            "min_ratio": MIN_RATIO[device_type], "conclusive": conclusive,
            "ok": not conclusive or ratio >= MIN_RATIO[device_type]}


def judge_gpu(result: dict[str, Any], claimed_s: float, seen: dict[str, Any], calls: int) -> None:
    """On a GPU, NVML's reading per call (mean utilisation x wall time / n) joins the wall time's verdict:
    a claim is rejected only where both are below ``MIN_RATIO``. NVML counts any kernel in its sampling
    period, so it reads a host-bound call of tens of microseconds as busy as its wall time (H200,
    2026-12-02), but at a millisecond a call it resolves an honest short kernel's idle gaps (0.39 for a
    16 us kernel at 1 ms a call, where the wall time read 0.016), and a forger's device is busy all
    along. Where NVML saw fewer than ``MIN_NVML_SAMPLES`` samples nothing is concluded."""
    nvml = seen.get("nvml") or {}
    samples = nvml.get("device_util_samples", 0)
    busy = nvml.get("device_busy_s") or 0.0
    if samples >= 1:
        per_call = max(busy / calls, 1e-12)
        result.update(per_call_device_s=per_call, ratio_device=claimed_s / per_call)
    if not result["conclusive"] or result["ok"]:
        return
    if samples < MIN_NVML_SAMPLES:
        result.update(judged_by="nothing: NVML saw too little of the burst", conclusive=False, ok=True)
    elif result["ratio_device"] >= MIN_RATIO["cuda"]:
        result.update(judged_by="device", ok=True)


def _one_burst(request: Request, cases: WorkloadCases, timed: tuple[TimedPlan, int], bursts: list[BurstPlan],
               claimed: float, expect: list[dict[str, Any]], device_type: str, deadline: float,
               observe: Callable[[], Any] | None,
               holds: tuple[Callable[[], AbstractContextManager[Any]], ...] = (nullcontext, nullcontext),
               memfd: bool = False, release: Callable[[], None] | None = None, prepared: bool = False,
               ) -> tuple[dict[str, Any], BurstVerdict | None]:
    """One burst of ``bursts[-1]``: (what it showed, a failed check of its outputs or None). ``holds``:
    (the device alone, the device shared). The first is held over the pings and the burst itself only:
    its room is made before and the judgement and the checked calls' references after it, each under
    the second (device work, untimed). ``release``: the caller holds the device alone already (its
    timing's window): the room and the burst are made in it, then ``release`` lets it go before the
    judgement. ``prepared``: its room was made before the window (:func:`first_burst`)."""
    calls, out_bytes = bursts[-1].calls, output_bytes(cases)
    header = burst_request(cases, bursts[-1], expect)
    alone, shared = holds
    before, during = (nullcontext, nullcontext) if release is not None else (shared, alone)
    if not prepared:
        with before():
            left = max(deadline - time.monotonic(), 0.001)
            request({"op": "burst_prepare", "calls": calls, "expect": expect, "edit_bytes": edit_bytes(header)}, left, 0)
    with during():
        left = max(deadline - time.monotonic(), 0.001)
        rtt = ping(request, left)
        done = observe() if observe is not None else None
        t0 = time.perf_counter()
        reply = request(header, max(deadline - time.monotonic(), 0.001), calls * (out_bytes + 4096) + 4096)
        wall = time.perf_counter() - t0
        seen = done() if done is not None else {}
        # On a GPU the harness's host work overlaps the device's when the device is the bottleneck: its
        # wall time is judged whole (and host-bound calls conclude nothing: judge), but for the reply's
        # trip through host memory on the memfd route.
        overhead = (harness_overhead(cases, bursts[-1], expect, device_type) if device_type == "cpu"
                    else transport_overhead(cases, calls) if memfd else 0.0)
    if release is not None:
        release()
    with shared():  # the outputs read, the checked calls' references and comparisons: device work, untimed
        return _judged(cases, (timed, bursts, claimed, expect, device_type), (wall, rtt, calls, overhead), seen,
                       reply)


def _judged(cases: WorkloadCases, what: tuple[Any, ...], measured: tuple[float, float, int, float],
            seen: dict[str, Any], reply: dict[str, Any]) -> tuple[dict[str, Any], BurstVerdict | None]:
    """A burst's verdict from what it showed, and its checked calls' outputs against their references."""
    (plan, samples), bursts, claimed, expect, device_type = what
    wall, rtt, calls, overhead = measured
    cpu = seen["worker_cpu_s"] + seen["other_cpu_s"] if "worker_cpu_s" in seen else None
    outside = seen.get("outside_cpu_s", 0.0) / max(seen.get("cores", 1) * wall, 1e-12)
    result = judge(claimed, wall, rtt, calls, device_type, cpu, overhead, seen.get("worker_wait_s"), outside)
    result["edited_calls"] = sum(int(at.numel()) for at, _, _ in bursts[-1].edits.values())
    if seen:
        result["outside"] = seen
    if device_type == "cuda":
        judge_gpu(result, claimed, seen, calls)
    outputs = call_outputs(reply, calls, expect, device_type)
    result["checked_calls"], failure = check_calls(cases, plan, samples, bursts, outputs, device_type)
    return result, failure


def _second_calls(first: dict[str, Any], out_bytes: int, deadline: float | None = None) -> int:
    """A GPU's second burst: ``GPU_SECOND_BURST_S`` at the first one's wall time per call (NVML's samples
    need that long), and at most a third of the time left before ``deadline`` (monotonic), within the
    caps on calls and on the outputs kept."""
    target = GPU_SECOND_BURST_S if deadline is None else min(GPU_SECOND_BURST_S, max(deadline - time.monotonic(), 0.0) / 3)
    want = math.ceil(target / max(first["wall_s"] / first["calls"], 1e-9))
    room = OUTPUT_BUDGET_BYTES["cuda"] // max(out_bytes, 1)
    return max(1, min(max(first["calls"], want), MAX_CALLS, room))


def _failed(attempts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last attempt that concluded the claim false, if any."""
    return next((a for a in reversed(attempts) if a["conclusive"] and not a["ok"]), None)


def _mixed(attempts: list[dict[str, Any]]) -> bool:
    """Whether one attempt concluded the claim false and another concluded nothing."""
    return _failed(attempts) is not None and any(not a["conclusive"] for a in attempts)


def _cleared(attempts: list[dict[str, Any]]) -> bool:
    """Whether the claim stands: the last attempt passed, conclusively where an earlier one failed."""
    last = attempts[-1]
    return last["ok"] and (last["conclusive"] or _failed(attempts) is None)


def run_burst(request: Request, cases: WorkloadCases, plan: TimedPlan, samples: int, timing: dict[str, Any],
              expect: list[dict[str, Any]], device_type: str, deadline: float,
              observe: Callable[[], Any] | None = None,
              holds: tuple[Callable[[], AbstractContextManager[Any]], ...] = (nullcontext, nullcontext),
              memfd: bool = False, release: Callable[[], None] | None = None, first: FirstBurst | None = None,
              ) -> tuple[dict[str, Any], BurstVerdict | None]:
    """Up to ``ATTEMPTS`` bursts (``MIXED_ATTEMPTS`` after a conclusive failure); (the record's
    ``correctness.burst``, a verdict when the claim fails).

    ``observe``, when given, is called before each burst and returns a function called after it, whose
    result (what was seen from outside: CPU time, NVML) is kept with that attempt. On a GPU the second
    burst lasts ``GPU_SECOND_BURST_S`` and is judged by NVML's device-busy time where it saw enough.
    ``holds`` (the device gate, alone and shared): alone over each burst's pings and request, nothing
    else; making its room, drawing the edits, judging and the references of the checked calls are
    untimed work. ``memfd``: the worker's replies go through host memory (on a GPU their transport's
    share of each call is timed and taken off: :func:`transport_overhead`). ``release``: the caller
    still holds the device alone from its timing: the first burst is drawn, made room for and run in
    that window (no second drain of the untimed work in flight, which every other lane waited through),
    and ``release`` lets it go before the judgement; a second burst waits for a window of its own.
    ``first``: the first burst made ready by the caller before the window (:func:`first_burst`).
    """
    claimed = claimed_time(timing)
    out_bytes = output_bytes(cases)
    calls = call_count(claimed, out_bytes, device_type)
    attempts: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"claimed_s": claimed, "attempts": attempts}
    bursts: list[BurstPlan] = []
    for attempt in range(MIXED_ATTEMPTS):
        if attempts and device_type == "cuda":
            calls = _second_calls(attempts[-1], out_bytes, deadline)
        in_window = release is not None and attempt == 0
        ready = first.ready(calls) if first is not None and attempt == 0 else None
        if ready is None:
            with nullcontext() if in_window else holds[1]():  # fresh inputs and edits, made on the device: untimed
                bursts.append(draw_burst(cases, calls, attempt, first.case if first is not None and attempt == 0 else None))
        else:
            bursts.append(ready)
        result, failure = _one_burst(request, cases, (plan, samples), bursts, claimed, expect, device_type, deadline,
                                     observe, holds, memfd, release if in_window else None, ready is not None)
        attempts.append(result)
        if failure is not None:
            return summary, failure
        if _cleared(attempts):
            summary["passed"] = True
            return summary, None
        if attempt + 1 >= (MIXED_ATTEMPTS if _mixed(attempts) else ATTEMPTS):
            break
    last = _failed(attempts) or attempts[-1]
    summary["passed"] = False
    ratio, per_call = last["ratio"], last["per_call_s"]
    return summary, BurstVerdict(Status.REWARD_HACK, (
        f"claimed median {claimed * 1e6:.4g} us is {ratio:.3g} x the parent-clocked time per call ({per_call * 1e6:.4g} us over a burst of "
        f"{last['calls']} calls with inputs edited between calls, after {len(attempts)} bursts), below the "
        f"{MIN_RATIO[device_type]:g} an honest candidate shows"))
