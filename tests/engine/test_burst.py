"""The parent-clocked burst (solbench.engine.burst with the worker's side, solbench.worker.burst): the plan,
the inputs each call saw, the check of calls chosen after the reply, and the judgement of a claim."""

from __future__ import annotations

import math
import os
import resource
import time
from pathlib import Path

import pytest
import torch

from solbench.data.problem import load_problem
from solbench.data.record import Status
from solbench.engine import burst
from solbench.engine.cases import prepare_cases
from solbench.engine.problem_code import load_reference
from solbench.engine.verification import after_timing, draw_plan
from solbench.guards import Observer
from solbench.timing import drive
from solbench.timing.config import TimingError
from solbench.worker.burst import burst_plan, output_buffers, stage_edits

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
SAMPLES = 40


def _cases(name: str = "scaled_add", workload: str = "n32", seed: int = 5):
    problem = load_problem(TINY / name)
    w = next(w for w in problem.workloads if w.name == workload)
    return prepare_cases(problem, w, base_seed=seed, device="cpu", rounds=1, ref_fn=load_reference(problem),
                         gen_fn=None)


def _worker_sets(cases, plan):
    """The worker's sets after a timing of SAMPLES samples: what :func:`after_timing` says, as copies."""
    return [[v.clone() if isinstance(v, torch.Tensor) else v for v in after_timing(cases, plan, SAMPLES, i).values()]
            for i in range(len(cases.sets))]


def _worker_burst(sets, header, run, buffers=True):
    """What the worker does with a burst request (solbench.worker.main.Worker.burst), run in this process:
    its reply and the parent's reading of every call's outputs."""
    staged = stage_edits(sets, header["edits"], header["calls"])
    room = output_buffers(header["calls"], header["expect"], "cpu") if buffers else None
    misfits = drive(burst_plan(sets, header["calls"], staged, room), run)
    described = [{"call": c, "outputs": [{"kind": "tensor", "type": "torch.Tensor", "exact": True,
                                          "shape": list(o.shape), "dtype": "float32", "device": "cpu",
                                          "contiguous": True, "aliases": [], "data": o}]} for c, o in misfits.items()]
    reply = {"stacked": room, "misfits": described}
    return reply, burst.call_outputs(reply, header["calls"], header["expect"], "cpu")


def _expect(cases):
    return [{"shape": list(v.shape), "dtype": "float32"} for v in cases.sets[0].expected.values()]


def _honest(x, y):
    return x * 2 + y


def test_every_call_is_edited_with_values_no_set_holds():
    cases = _cases()
    bp = burst.draw_burst(cases, 50, 0)
    calls = sorted(c for at, _, _ in bp.edits.values() for c in at.tolist())
    assert calls == list(range(50))  # one edit before every call
    for name, (at, index, values) in bp.edits.items():
        assert index.shape == values.shape == (at.numel(), burst.edit_count(cases, name))
        for s in cases.sets:  # values of a case drawn for the burst: no timing set holds them there
            assert not torch.equal(s.inputs[name].reshape(-1)[index[0]], values[0])
    again = burst.draw_burst(cases, 50, 0)
    assert all(torch.equal(again.edits[n][1], bp.edits[n][1]) for n in bp.edits)  # derived from the secret seed
    other = burst.draw_burst(cases, 50, 1)  # the second attempt: new positions
    assert any(not torch.equal(other.edits[n][1][:1], bp.edits[n][1][:1]) for n in bp.edits if n in other.edits)


@pytest.mark.parametrize("buffers", [True, False])
def test_an_honest_burst_passes_its_checks_over_two_attempts(buffers):
    cases = _cases()
    plan = draw_plan(cases, 10)
    sets = _worker_sets(cases, plan)
    bursts = []
    for attempt in range(2):  # the second burst starts from the sets the first one left
        bursts.append(burst.draw_burst(cases, 30, attempt))
        header = burst.burst_request(cases, bursts[-1], _expect(cases))
        reply, outputs = _worker_burst(sets, header, _honest, buffers)
        assert (reply["stacked"] is None) == (not buffers) and len(reply["misfits"]) == (0 if buffers else 30)
        chosen, failure = burst.check_calls(cases, plan, SAMPLES, bursts, outputs, "cpu")
        assert failure is None and len(chosen) == burst.CHECKED_CALLS
    for c in range(30):  # the parent's account of every call's inputs, against an independent replay
        inputs = burst.call_inputs(cases, plan, SAMPLES, bursts, c)
        assert torch.equal(outputs(c)[0]["data"], _honest(**inputs))


def test_a_worker_that_skips_calls_is_caught():
    cases = _cases()
    plan = draw_plan(cases, 10)
    sets = _worker_sets(cases, plan)
    bp = burst.draw_burst(cases, 40, 0)
    header = burst.burst_request(cases, bp, _expect(cases))
    reply, honest = _worker_burst(sets, header, _honest)
    # Computes one call in eight and serves the last answer otherwise: a checked call is stale.
    _, failure = burst.check_calls(cases, plan, SAMPLES, [bp], lambda c: honest(c - c % 8), "cpu")
    assert failure is not None and failure.status == Status.INCORRECT and "checked at random" in failure.reason
    # A subclass (or anything but the expected exact tensor) is kept apart and judged as such.
    odd = [{"kind": "tensor", "type": "Lazy", "exact": False}]
    _, failure = burst.check_calls(cases, plan, SAMPLES, [bp], lambda c: odd, "cpu")
    assert failure is not None and "subclass" in failure.reason
    for bad in ({**reply, "stacked": [reply["stacked"][0][:-1]]}, {**reply, "stacked": None},
                {**reply, "misfits": [{"call": 99}]}):
        with pytest.raises(burst.MalformedReply):
            burst.call_outputs(bad, 40, header["expect"], "cpu")


def test_the_judgement_of_a_claim():
    ok = burst.judge(1e-3, 0.05, 1e-4, 50, "cpu")  # 1 ms claimed, 50 calls in 50 ms
    assert ok["ok"] and ok["per_call_s"] == pytest.approx((0.05 - 1e-4) / 50) and ok["ratio"] == pytest.approx(1.0, rel=0.01)
    forged = burst.judge(1e-4, 0.05, 1e-4, 50, "cpu")
    assert not forged["ok"] and forged["ratio"] == pytest.approx(0.1, rel=0.01)
    # A slow answer to the pings buys at most RTT_SHARE of the window.
    slow_pings = burst.judge(1e-4, 0.05, 0.04, 50, "cpu")
    assert slow_pings["per_call_s"] == pytest.approx(0.05 * (1 - burst.RTT_SHARE) / 50)
    # On the CPU the worker's CPU time stands in where it is less than the wall time (shared cores).
    shared = burst.judge(1e-3, 0.2, 1e-4, 50, "cpu", cpu_s=0.05)
    assert shared["ok"] and shared["per_call_s"] == pytest.approx(1e-3)
    assert burst.judge(1e-3, 0.2, 1e-4, 50, "cuda", cpu_s=0.05)["per_call_s"] > 3e-3  # not on a GPU
    short = burst.judge(1e-6, 0.001, 1e-4, 8, "cpu")  # too short to conclude anything
    assert short["ok"] and not short["conclusive"]
    # The harness's own work per call is not the candidate's: taken off.
    harness = burst.judge(1e-3, 0.06, 0.0, 50, "cpu", overhead_s=2e-4)
    assert harness["per_call_s"] == pytest.approx(0.06 / 50 - 2e-4) and harness["conclusive"]
    # Where it is most of the time, what is left is too small to conclude anything.
    swamped = burst.judge(1e-5, 0.06, 0.0, 50, "cpu", overhead_s=1e-3)
    assert swamped["ok"] and not swamped["conclusive"] and swamped["overhead_share"] > burst.MAX_OVERHEAD_SHARE
    # Other processes on the worker's cores: a CPU burst concludes nothing (a forged claim included).
    crowded = burst.judge(1e-4, 0.05, 1e-4, 50, "cpu", outside_share=burst.MAX_OUTSIDE_SHARE + 0.01)
    assert crowded["ok"] and not crowded["conclusive"] and crowded["ratio"] == pytest.approx(0.1, rel=0.01)
    assert not burst.judge(1e-4, 0.05, 1e-4, 50, "cpu", outside_share=burst.MAX_OUTSIDE_SHARE - 0.01)["ok"]
    assert not burst.judge(1e-4, 0.2, 1e-4, 50, "cuda", outside_share=0.9)["ok"]  # a GPU's verdict is not the CPU's


def test_the_harness_overhead_is_measured_in_the_parent():
    cases = _cases()
    bp = burst.draw_burst(cases, 200, 0)
    per_call = burst.harness_overhead(cases, bp, _expect(cases), "cpu")
    assert 1e-7 < per_call < 1e-3  # microseconds: a loop step, a few-element write, a small copy


def _worker_side_cpu(cases, bp, header, run, arena):
    """CPU time per call of this process (every thread: the kernel's count of a worker's) doing a burst
    request's work as a CPU worker does (solbench.worker.main: Worker.burst_prepare untimed, then stage
    the edits, the calls, and the reply sent through the file made for it) with ``run`` as the candidate."""
    import socket

    from solbench.worker.burst import reply_arena
    from solbench.worker.wire import encode_header, recv_message, send_encoded

    sets = _worker_sets(cases, draw_plan(cases, 10))
    buffers = output_buffers(bp.calls, header["expect"], "cpu")
    room = reply_arena(buffers) if arena else None
    a, b = socket.socketpair()
    with a, b:
        faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.process_time()
        staged = stage_edits(sets, header["edits"], bp.calls)
        drive(burst_plan(sets, bp.calls, staged, buffers), run)
        send_encoded(a, *encode_header({"ok": True, "stacked": buffers, "misfits": [], "findings": []}),
                     time.monotonic() + 60, arena=room)
        spent = time.process_time() - t0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
        reply = recv_message(b, time.monotonic() + 60)
    if room is not None:
        room.close()
    return spent / bp.calls, reply["stacked"], buffers, faults


def test_the_harness_overhead_matches_the_worker_side_of_a_burst_with_a_candidate_that_does_nothing():
    """The parent's estimate of the harness's own work per call against an independent measurement: this
    process's CPU time (all its threads) over every call of the worker's side of a burst, the candidate
    returning one output it made before. Before the reply had a file faulted in ahead of the burst, its
    copy paid a page fault every 4 KiB here (5-25 us per call for n32's 8 KiB rows), which the estimate
    missed: honest 1.6 us calls were judged REWARD_HACK."""
    cases = _cases()
    calls = 5000  # 40 MB of n32 rows: the reply goes through shared memory
    bp = burst.draw_burst(cases, calls, 0)
    header = burst.burst_request(cases, bp, _expect(cases))
    done = _honest(**cases.sets[0].inputs)
    threads = torch.get_num_threads()
    # One intra-op thread: the pool's threads spin on after a parallel copy (the reply file's, made just
    # before), and this process's CPU time would count that spin in the calls that follow.
    torch.set_num_threads(1)
    try:
        worker = min(_worker_side_cpu(cases, bp, header, lambda *args: done, True)[0] for _ in range(5))
        estimate = min(burst.harness_overhead(cases, bp, _expect(cases), "cpu") for _ in range(5))
    finally:
        torch.set_num_threads(threads)
    assert 0.7 < estimate / worker < 1.4, (estimate, worker)


def test_the_reply_file_is_faulted_in_before_the_burst_and_carries_the_rows():
    cases = _cases()
    bp = burst.draw_burst(cases, 4000, 1)
    header = burst.burst_request(cases, bp, _expect(cases))
    *_, fresh = _worker_side_cpu(cases, bp, header, _honest, False)
    _, sent, kept, ready = _worker_side_cpu(cases, bp, header, _honest, True)
    assert all(torch.equal(s, k) for s, k in zip(sent, kept, strict=True)) and kept[0].abs().sum() > 0
    # The fresh file's page faults are inside the clock, the prepared one's before it: counted, not timed
    # (a CPU-time comparison of the two flipped on a loaded CI box). One fault per 4 KiB page of the rows.
    pages = sum(k.numel() * k.element_size() for k in kept) // resource.getpagesize()
    assert fresh - ready > pages // 2, (fresh, ready, pages)
    from solbench.worker.burst import reply_arena

    assert reply_arena(output_buffers(4, _expect(cases), "cpu")) is None  # inline frames: no file


def test_the_call_count_follows_the_claim_within_its_caps():
    assert burst.call_count(1e-3, 1024, "cpu") == round(burst.TARGET_S["cpu"] / 1e-3)
    assert burst.call_count(1e-9, 1024, "cpu") == burst.MAX_CALLS  # a forged tiny claim: capped
    assert burst.call_count(1.0, 1024, "cpu") == burst.MIN_CALLS
    assert burst.call_count(1e-6, burst.OUTPUT_BUDGET_BYTES["cpu"] // 10, "cpu") == 10  # the outputs kept must fit
    # a GPU burst concludes only from GPU_MIN_CALL_S a call: a shorter claim gets no more calls than that
    assert burst.call_count(1e-6, 1024, "cuda") == math.ceil(burst.TARGET_S["cuda"] / burst.GPU_MIN_CALL_S)
    assert burst.call_count(5e-3, 1024, "cuda") == max(burst.MIN_CALLS, round(burst.TARGET_S["cuda"] / 5e-3))


def test_a_gpu_burst_of_a_sub_millisecond_claim_concludes_where_a_call_really_takes_a_millisecond():
    """The fewest calls a GPU burst makes still last twice the least window that concludes where each call
    takes GPU_MIN_CALL_S: a forger claiming microseconds for calls that take longer is rejected."""
    calls = burst.call_count(1e-5, 1024, "cuda")
    assert calls * burst.GPU_MIN_CALL_S >= 2 * burst.MIN_WINDOW_S
    forged = burst.judge(1e-5, calls * 1.5 * burst.GPU_MIN_CALL_S, 1e-4, calls, "cuda")
    assert forged["conclusive"] and not forged["ok"]
    honest = burst.judge(2e-4, calls * 2.5e-4, 1e-4, calls, "cuda")  # host-bound calls: nothing concluded
    assert not honest["conclusive"] and honest["ok"]


def test_staging_refuses_edits_the_sets_cannot_take():
    sets = [[torch.zeros(4, 4), torch.zeros(4, 4, dtype=torch.int32)]]
    good = {"input": 0, "calls": torch.tensor([0]), "index": torch.tensor([[1, 2]]), "values": torch.ones(1, 2)}
    staged = stage_edits(sets, [good], 1)
    assert 0 in staged and len(staged) == 1
    for bad in ({**good, "input": 1, "values": torch.ones(1, 2, dtype=torch.int32)},  # an integer input
                {**good, "index": torch.tensor([[1, 16]])},  # out of range
                {**good, "calls": torch.tensor([3])},  # no such call
                {**good, "input": 5}):
        with pytest.raises(TimingError):
            stage_edits(sets, [bad], 1)


def _slow_honest(x, y):
    """Right, and slow enough (a few hundred microseconds) to stand well above the harness's own work."""
    for _ in range(60):
        out = x * 2 + y
    return out


@pytest.mark.slow
def test_a_burst_end_to_end_passes_an_honest_claim_and_rejects_a_forged_one():
    cases = _cases()
    plan = draw_plan(cases, 10)

    def worker():
        """A request function answering the worker's three requests in this process, on its own sets."""
        sets, room = _worker_sets(cases, plan), {}

        def request(header, timeout_s, max_bytes):
            if header["op"] == "burst_prepare":
                room["buffers"] = output_buffers(header["calls"], header["expect"], "cpu")
                room["edit_bytes"] = header["edit_bytes"]
            if header["op"] == "burst":  # the prepare made room for the request's own tensors too
                need = sum(t.numel() * t.element_size() for e in header["edits"] for t in (e["calls"], e["index"], e["values"]))
                assert 0 < need <= room["edit_bytes"]
            if header["op"] != "burst":
                return {"ok": True}
            misfits = drive(burst_plan(sets, header["calls"], stage_edits(sets, header["edits"], header["calls"]),
                                       room["buffers"]), _slow_honest)
            return {"ok": True, "stacked": room["buffers"],
                    "misfits": [{"call": c, "outputs": o} for c, o in misfits.items()]}

        return request

    x, y = cases.sets[0].inputs["x"], cases.sets[0].inputs["y"]
    t0 = time.thread_time()
    for _ in range(50):
        _slow_honest(x, y)
    honest_s = (time.thread_time() - t0) / 50
    observe = Observer(os.getpid(), "cpu").start  # this process plays the worker: its CPU time counts
    deadline = time.monotonic() + 60
    summary, verdict = burst.run_burst(worker(), cases, plan, SAMPLES, {"median_s": honest_s}, _expect(cases), "cpu",
                                       deadline, observe)
    assert verdict is None and summary["passed"], summary
    summary, verdict = burst.run_burst(worker(), cases, plan, SAMPLES, {"median_s": honest_s / 10}, _expect(cases),
                                       "cpu", deadline, observe)
    if verdict is None:  # only where other processes crowded this process's cores: nothing concluded then
        crowded = [a for a in summary["attempts"] if a["outside_share"] > burst.MAX_OUTSIDE_SHARE]
        assert crowded and all(not a["conclusive"] for a in crowded), summary
        return
    assert verdict.status == Status.REWARD_HACK and not summary["passed"]
    assert len(summary["attempts"]) == burst.ATTEMPTS and "parent-clocked" in verdict.reason
    assert all(a["ratio"] < burst.MIN_RATIO["cpu"] for a in summary["attempts"])


def _gpu(claimed_s: float, wall_s: float, calls: int, util: float | None, samples: int = 6) -> dict:
    result = burst.judge(claimed_s, wall_s, 0.0, calls, "cuda")
    seen = {} if util is None else {"nvml": {"device_util_samples": samples, "device_util_mean": util,
                                             "device_busy_s": util * wall_s}}
    burst.judge_gpu(result, claimed_s, seen, calls)
    return result


def test_a_gpu_burst_concludes_only_on_long_calls_where_the_wall_time_and_nvml_agree():
    # H200, 2026-12-02: an honest 5.5 us addmm ran 55 us a call back to back and NVML read it ~100% busy:
    # host-bound, nothing concluded
    host_bound = _gpu(5.5e-6, 0.5, 9091, 1.0)
    assert host_bound["ok"] and not host_bound["conclusive"] and host_bound["ratio_device"] < burst.MIN_RATIO["cuda"]
    # an honest 16 us kernel at 1 ms a call (a loaded host): the wall time reads 0.016, NVML 0.4: passes
    loaded = _gpu(16e-6, 3.0, 3000, 0.04)
    assert loaded["ok"] and loaded["conclusive"] and loaded["judged_by"] == "device"
    assert _gpu(16e-6, 3.0, 3000, 0.0)["ok"]  # a device NVML saw idle: nothing against the claim
    # a forger claiming a tenth of 2 ms of device work: both below the threshold
    forged = _gpu(2e-4, 0.2, 100, 1.0)
    assert not forged["ok"] and forged["conclusive"] and forged["ratio_device"] == pytest.approx(0.1)
    assert _gpu(2e-3, 0.2, 100, 1.0)["ok"]  # the truth passes on the wall time
    # too few NVML samples (or none): a failing wall time concludes nothing on a GPU
    for blind in (_gpu(2e-4, 0.2, 100, 1.0, samples=2), _gpu(2e-4, 0.2, 100, None)):
        assert blind["ok"] and not blind["conclusive"]
    # so a GPU's second burst lasts a second at the first one's pace, within the caps
    assert burst._second_calls({"wall_s": 0.2, "calls": 100}, 1024) == 500
    assert burst._second_calls({"wall_s": 0.05, "calls": 5000}, 1024) == burst.MAX_CALLS
    assert burst._second_calls({"wall_s": 0.2, "calls": 100}, burst.OUTPUT_BUDGET_BYTES["cuda"] // 200) == 200


def test_a_busy_machine_s_run_queue_wait_is_not_counted_against_an_honest_claim():
    # 1000 calls of an honest 10 us claim; the burst took 50 ms because the main thread waited 40 ms for a core
    loaded = burst.judge(10e-6, 0.05, 0.0, 1000, "cpu", cpu_s=0.05, wait_s=0.04)
    assert loaded["ok"] and loaded["ratio"] == pytest.approx(1.0)
    assert not burst.judge(10e-6, 0.05, 0.0, 1000, "cpu", cpu_s=0.05)["ok"]  # without the wait: 0.2, rejected
    # a forger claiming a tenth of what it does, on a quiet machine, is still caught
    assert not burst.judge(1e-6, 0.01, 0.0, 1000, "cpu", cpu_s=0.01, wait_s=0.0)["ok"]
    # the wait is taken off the wall time only: it never lowers the CPU time's bound below it
    assert burst.judge(1e-6, 0.05, 0.0, 1000, "cpu", cpu_s=0.01, wait_s=0.0)["ratio"] == pytest.approx(0.1)


def test_on_a_gpu_each_burst_call_is_synchronised_before_its_output_is_kept():
    """A call's work on a side stream must be done before its output is copied and the next edit
    made, as in the rounds and the timing: the worker passes a device synchronisation."""
    from solbench.timing import drive
    from solbench.worker import burst_plan

    events = []
    sets = [[torch.zeros(3)], [torch.ones(3)]]

    def call(x):
        events.append("call")
        return x + 1

    kept = drive(burst_plan(sets, 4, stage_edits(sets, [], 4), None, lambda: events.append("sync")), call)
    assert events == ["call", "sync"] * 4
    assert all(torch.equal(kept[c], sets[c % 2][0] + 1) for c in range(4))


def test_a_gpu_burst_over_memfd_takes_its_replys_trip_through_host_memory_off_each_call(monkeypatch):
    """On a GPU over the memfd route the burst's outputs come back through host memory inside the
    parent's clock: that share of each call (timed by the parent moving the same outputs the same way)
    is taken off, and an honest claim is not judged a reward hack for it, where NVML agrees with the wall
    time; the same wall time without it is one. The measure itself grows with the outputs' bytes."""
    cases = _cases()
    plan = draw_plan(cases, 10)
    small = burst.transport_overhead(cases, 4)
    assert small > 0
    big = _cases(workload=max(cases.problem.workloads, key=lambda w: cases.problem.auto_bytes(
        cases.problem.resolve_axes(w))).name)
    assert burst.transport_overhead(big, 4) >= small
    trip_s, kernel_s = 0.004, 0.001  # per call: the reply's transport, the kernel claimed
    monkeypatch.setattr(burst, "transport_overhead", lambda c, calls: trip_s)
    sets = _worker_sets(cases, plan)

    def request(header, timeout_s, max_bytes):
        if header["op"] != "burst":
            return {"ok": True}
        buffers = output_buffers(header["calls"], header["expect"], "cpu")
        drive(burst_plan(sets, header["calls"], stage_edits(sets, header["edits"], header["calls"]), buffers), _honest)
        time.sleep(header["calls"] * (trip_s + kernel_s))
        return {"ok": True, "stacked": buffers, "misfits": []}

    def observe():  # NVML: the device busy only for the kernels
        began = time.monotonic()
        return lambda: {"nvml": {"device_util_samples": 20,
                                 "device_busy_s": (time.monotonic() - began) * kernel_s / (trip_s + kernel_s)}}

    for memfd, passed in ((True, True), (False, False)):
        summary, verdict = burst.run_burst(request, cases, plan, SAMPLES, {"median_s": kernel_s}, _expect(cases),
                                           "cuda", time.monotonic() + 60, observe, memfd=memfd)
        assert (verdict is None) == passed, (memfd, summary)
        assert summary["attempts"][0]["overhead_s"] == (trip_s if memfd else 0.0)


def test_the_first_burst_runs_in_the_timings_window_and_lets_it_go_before_its_judgement():
    """With ``release`` (the caller still holds its timing's window alone) the first burst's room and
    request are made inside that window with the case made before it (``first``), nothing waits for a
    second window, and the window is let go before the judgement (shared work); a second burst draws,
    makes its room and is judged under the shared hold and runs in a window of its own."""
    from contextlib import contextmanager

    cases = _cases()
    plan = draw_plan(cases, 10)
    sets = _worker_sets(cases, plan)
    events: list[str] = []

    def hold(name):
        @contextmanager
        def held():
            events.append(f"{name}+")
            yield
            events.append(f"{name}-")
        return held

    def request(header, timeout_s, max_bytes):
        events.append(header["op"])
        if header["op"] != "burst":
            return {"ok": True}
        buffers = output_buffers(header["calls"], header["expect"], "cpu")
        drive(burst_plan(sets, header["calls"], stage_edits(sets, header["edits"], header["calls"]), buffers), _honest)
        # A forged claim below: the first burst fails its ratio, a second one runs. Long beside the harness's own
        # loop of 20,000 calls (taken off as overhead): at 30 ms a loaded 2-core machine made it 3/4 of the
        # burst, which then concluded nothing (a flaky test).
        time.sleep(0.3)
        return {"ok": True, "stacked": buffers, "misfits": []}

    first = burst.burst_inputs(cases, 0)
    summary, _ = burst.run_burst(request, cases, plan, SAMPLES, {"median_s": 1e-9}, _expect(cases), "cpu",
                                 time.monotonic() + 60, None, (hold("alone"), hold("shared")),
                                 release=lambda: events.append("release"), first=burst.FirstBurst(first))
    assert len(summary["attempts"]) == 2, summary
    one = events[:events.index("shared-") + 1]
    assert one == ["burst_prepare", "ping", "ping", "ping", "ping", "ping", "burst", "release", "shared+", "shared-"], one
    two = events[len(one):]
    assert two[:3] == ["shared+", "shared-", "shared+"] and two[3] == "burst_prepare", two  # draw, then the room
    assert two[two.index("alone+") + 1:two.index("alone-")] == ["ping"] * 5 + ["burst"], two
    assert events.count("release") == 1
    again = burst.draw_burst(cases, summary["attempts"][0]["calls"], 0)  # the case made before: the same edits
    drawn = burst.draw_burst(cases, summary["attempts"][0]["calls"], 0, first)
    assert all(torch.equal(a, b) for n in again.edits for a, b in zip(again.edits[n], drawn.edits[n], strict=True))


def test_a_gpus_first_burst_is_drawn_and_made_room_for_ahead_for_the_most_calls_a_claim_asks_for():
    """On a GPU the first burst's edits are drawn and its room made before the timing's window, for the
    most calls any claim asks for (``first_calls``), with the pool sized for the timing request too; a claim
    that asks for fewer calls gets the plan's first calls (the same rows of the same edits)."""
    cases = _cases()
    sent = []

    def request(header, timeout_s, max_bytes):
        sent.append(dict(header))
        return {"ok": True}

    ready = burst.first_burst(request, cases, _expect(cases), "cuda", 10.0, room=lambda h: 1000, timing_room=5000)
    most = burst.call_count(0.0, burst.output_bytes(cases), "cuda")
    assert burst.first_calls(cases) == most and most >= burst.call_count(2e-3, burst.output_bytes(cases), "cuda")
    assert [h["op"] for h in sent] == ["burst_prepare"] and sent[0]["calls"] == most
    assert sent[0]["reply_room"] == 5000  # the larger of the burst's room and the timing's
    full = ready.plan
    assert full is not None and full.calls == most
    fewer = ready.ready(most - 7)
    assert fewer is not None and fewer.calls == most - 7
    for name, (at, index, values) in fewer.edits.items():
        keep = full.edits[name][0] < most - 7
        assert bool((at < most - 7).all()) and torch.equal(at, full.edits[name][0][keep])
        assert torch.equal(index, full.edits[name][1][keep]) and torch.equal(values, full.edits[name][2][keep])
    assert sum(int(e[0].numel()) for e in fewer.edits.values()) == most - 7  # one edit before every call
    assert ready.ready(most + 1) is None
    assert burst.first_burst(request, cases, _expect(cases), "cpu", 10.0).plan is None and len(sent) == 1


def test_a_first_burst_made_ready_ahead_runs_in_the_window_with_its_pings_and_calls_only():
    """With its plan and room made ahead, nothing of the first burst but its pings and its request runs in the
    timing's window: no burst_prepare there."""
    from contextlib import contextmanager

    cases = _cases()
    plan = draw_plan(cases, 10)
    sets = _worker_sets(cases, plan)
    events: list[str] = []

    @contextmanager
    def held():
        yield

    def request(header, timeout_s, max_bytes):
        events.append(header["op"])
        if header["op"] != "burst":
            return {"ok": True}
        assert all(bool((e["calls"] < header["calls"]).all()) for e in header["edits"])
        buffers = output_buffers(header["calls"], header["expect"], "cpu")
        drive(burst_plan(sets, header["calls"], stage_edits(sets, header["edits"], header["calls"]), buffers), _honest)
        return {"ok": True, "stacked": buffers, "misfits": []}

    claimed = 1e-3
    calls = burst.call_count(claimed, burst.output_bytes(cases), "cpu")
    case = burst.burst_inputs(cases, 0)
    first = burst.FirstBurst(case, burst.draw_burst(cases, calls + 10, 0, case))
    summary, _ = burst.run_burst(request, cases, plan, SAMPLES, {"median_s": claimed}, _expect(cases), "cpu",
                                 time.monotonic() + 60, None, (held, held),
                                 release=lambda: events.append("release"), first=first)
    assert events[:7] == ["ping"] * 5 + ["burst", "release"], events
    assert summary["attempts"][0]["calls"] == calls


@pytest.mark.slow
def test_an_honest_microsecond_candidate_passes_its_burst_in_a_real_worker_with_the_harness_work_estimated(tmp_path):
    """``tiny.scaled_add`` n4 and n32 (1.5 us calls, the harness's own work several times that) through a
    real worker: PASSED, and wherever other processes left the cores alone, the parent's estimate of the
    harness's work per call is within a factor 1.5 of the kernel's count of the worker's CPU time per call
    less the claim, and a conclusive attempt's ratio is at least 1.5 x ``MIN_RATIO`` (at main's base: 0.20-0.27,
    the n32 record REWARD_HACK)."""
    import solbench
    from solbench.engine.identity import RunIdentity
    from solbench.engine.runner import PlanItem, Runner
    from solbench.worker.candidate import describe_candidates

    options = solbench.RunOptions(device="cpu", budget_s=0.05, seed=3, compile_timeout_s=60, in_flight=1)
    runner = Runner(options, tmp_path / "r.jsonl", identity=RunIdentity(run_id="burst", base_seed=11))
    problem = load_problem(TINY / "scaled_add")
    honest = Path(__file__).resolve().parents[1] / "candidates" / "honest.py"
    records = runner.run_item(PlanItem(problem, problem.workloads[:2], describe_candidates([honest])))
    assert [r.status for r in records] == ["PASSED", "PASSED"]
    for r in records:
        summary = r.correctness["burst"]
        for a in summary["attempts"]:
            seen = a["outside"]
            if a["outside_share"] > burst.MAX_OUTSIDE_SHARE:
                continue
            worker = (seen["worker_cpu_s"] + seen["other_cpu_s"]) / a["calls"] - summary["claimed_s"]
            assert 1 / 1.5 < a["overhead_s"] / worker < 1.5, (r.workload, a)
            assert not a["conclusive"] or a["ratio"] >= 1.5 * burst.MIN_RATIO["cpu"], (r.workload, a)


@pytest.mark.parametrize(("seen", "passed", "bursts"), [
    ([(True, False), (False, True), (True, True)], True, 3),  # a failure, nothing concluded, a conclusive pass
    ([(True, False), (False, True), (False, True)], False, 3),  # a failure never cleared: it stands
    ([(True, False), (True, False)], False, 2),  # two conclusive failures: no third burst
    ([(False, True)], True, 1),  # nothing concluded and nothing against the claim
    ([(True, False), (True, True)], True, 2),  # a retried failure cleared by a conclusive pass
])
def test_a_conclusive_failure_is_cleared_only_by_a_conclusive_pass(monkeypatch, seen, passed, bursts):
    """CI, 2026-12-03: forge_samples_only's first burst concluded 0.105 x its claim; its second, on cores
    crowded by other processes, concluded nothing and the forgery PASSED. The attempts' judgements are
    scripted here (``conclusive``, ``ok``); what run_burst makes of them is the thing tested."""
    script = iter(seen)

    def one_burst(*args, **kwargs):
        conclusive, ok = next(script)
        return {"conclusive": conclusive, "ok": ok, "ratio": 1.0 if ok else 0.1, "per_call_s": 1e-4,
                "calls": 100}, None

    monkeypatch.setattr(burst, "_one_burst", one_burst)
    monkeypatch.setattr(burst, "draw_burst", lambda *args: None)
    cases = _cases()
    summary, verdict = burst.run_burst(None, cases, None, SAMPLES, {"median_s": 1e-5}, _expect(cases), "cpu",
                                       time.monotonic() + 60)
    assert summary["passed"] is passed and (verdict is None) is passed and len(summary["attempts"]) == bursts
    if not passed:
        assert verdict.status == Status.REWARD_HACK and "0.1 x" in verdict.reason
