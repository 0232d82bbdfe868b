"""Timing as a plan (solbench.timing.timing_plan) and the parent's checks it carries out
(solbench.timing.verify): edits between samples, kept outputs, the refresh run. On the CPU loop,
and on the CUDA loops (events and graph mode) through fake CUDA layers: a fake clock, events, and a
fake graph whose replays re-run what the candidate recorded while it was captured."""

from __future__ import annotations

import contextlib
import statistics
import sys

import numpy as np
import pytest
import torch

import solbench.timing.cuda as tc
import solbench.timing.graph as tg
from solbench.timing import Edit, TimingConfig, TimingError, Verify, drive, time_calls, timing_plan
from solbench.timing.stats import median_ci


def _sets(n: int, size: int = 8) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(n)
    return [[torch.randn(size, generator=g), torch.randn(size, generator=g)] for _ in range(n)]


def _honest(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + y


def _edited(sets: list[list[torch.Tensor]], edits: list[Edit], i: int, sample: int) -> list[torch.Tensor]:
    """Set ``i`` as sample ``sample`` saw it: the original with the edits due by then."""
    state = [t.clone() for t in sets[i]]
    for e in edits:
        if e.set == i and e.sample <= sample:
            state[e.input].view(-1)[e.index] = e.values
    return state


def _plan(sets: list[list[torch.Tensor]]) -> tuple[list[Edit], list[torch.Tensor]]:
    edits = [Edit(2, 2, 0, torch.tensor([1, 5]), torch.tensor([10.0, 20.0])),
             Edit(4, 1, 1, torch.tensor([0]), torch.tensor([-7.0])),
             Edit(900, 0, 0, torch.tensor([0]), torch.tensor([99.0]))]  # never reached
    return edits, [torch.randn(8), torch.randn(8)]


def test_cpu_plan_edits_keeps_and_refreshes_outside_the_window():
    sets = _sets(3)
    original = [[t.clone() for t in s] for s in sets]
    mirror = [[t.clone() for t in s] for s in sets]
    edits, fresh = _plan(sets)
    verify = Verify(sets, edits, keep=[0, 2, 4, 500], refresh=(1, fresh), mirror=mirror)
    seen: list[tuple[int, list[torch.Tensor]]] = []

    def call(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.append((next(i for i, s in enumerate(sets) if s[0] is x), [x.clone(), y.clone()]))
        return _honest(x, y)

    config = TimingConfig(budget_s=1.0, warmup_s=0.0, min_samples=10, max_samples=10)
    result, last = drive(timing_plan(sets, config, verify), call)
    assert result.n == verify.sample == 10 and verify.edits_applied == 2
    timed = seen[3:13]  # after 3 warm-up calls (one per set), before the refresh call
    for s, (i, args) in enumerate(timed):
        assert i == s % 3  # the set a sample runs is sample % sets
        assert all(torch.equal(a, b) for a, b in zip(args, _edited(original, edits, i, s), strict=True))
    assert [(s, i) for s, i, _ in verify.kept] == [(0, 0), (2, 2), (4, 1)]
    for s, i, out in verify.kept:
        assert torch.equal(out, _honest(*_edited(original, edits, i, s)))
    # The refresh: the new data written into set 1 in place (same tensors), one more call.
    assert seen[-1][0] == 1 and len(seen) == 14
    assert torch.equal(sets[1][0], fresh[0]) and torch.equal(verify.refreshed, _honest(*fresh))
    for i in (0, 2):  # the last output of each set saw every edit applied to it
        assert torch.equal(last[i], _honest(*_edited(original, edits, i, 9)))
    # The copies taken before timing received the same writes (the harness's, not the candidate's).
    assert all(torch.equal(a, b) for s, m in zip(sets, mirror, strict=True) for a, b in zip(s, m, strict=True))


def test_the_candidate_is_called_from_one_place_with_no_timing_loop_above_it():
    stacks = set()

    def call(i: int) -> int:
        frame, names = sys._getframe(1), []
        while frame is not None:
            names.append((frame.f_globals.get("__name__"), frame.f_code.co_name, frame.f_lineno))
            frame = frame.f_back
        stacks.add(tuple(names))
        return i

    verify = Verify(_sets(2), refresh=(0, [torch.zeros(8), torch.zeros(8)]))
    time_calls(call, 2, TimingConfig(budget_s=0.01, warmup_s=0.001, min_samples=5), verify)
    assert len(stacks) == 1  # warm-up, timed samples and the refresh call: the same frames and lines
    (stack,) = stacks
    assert stack[0][:2] == ("solbench.timing", "drive")
    assert not any(module.startswith("solbench.timing.") for module, _, _ in stack)


def test_an_exception_is_thrown_into_the_plan():
    def call(i: int) -> int:
        raise ValueError("candidate failed")

    with pytest.raises(ValueError, match="candidate failed"):
        time_calls(call, 2, TimingConfig(budget_s=0.01, warmup_s=0.0))


@pytest.mark.parametrize(("edit", "refresh", "message"), [
    (Edit(0, 5, 0, torch.tensor([0]), torch.tensor([1.0])), None, "no such input"),
    (Edit(0, 0, 0, torch.tensor([8]), torch.tensor([1.0])), None, "out of range"),
    (Edit(0, 0, 0, torch.tensor([0]), torch.tensor([1.0], dtype=torch.float64)), None, "floating tensor"),
    (Edit(0, 0, 2, torch.tensor([0]), torch.tensor([1])), None, "floating tensor"),
    (None, (3, []), "no such set"),
    (None, (0, [torch.zeros(4), torch.zeros(8), torch.arange(8)]), "shape or dtype"),
])
def test_bad_plans_are_timing_errors(edit, refresh, message):
    sets = [[torch.zeros(8), torch.zeros(8), torch.arange(8)]]
    with pytest.raises(TimingError, match=message):
        Verify(sets, [edit] if edit else [], refresh=refresh)


# --- the CUDA loops through fake CUDA layers ------------------------------------------------------

class _Event:
    def __init__(self, enable_timing: bool = True):
        self.t = 0.0


class _Stream:
    def __init__(self, device: object = None):
        pass

    def wait_stream(self, other: object) -> None:
        pass


@contextlib.contextmanager
def _stream_ctx(stream: object):
    yield


class _Setup(tc._Setup):
    fake: _FakeCuda

    def __init__(self, config: TimingConfig):
        self.config, self.device, self.stream = config, "cuda:0", _Stream()
        self.l2_bytes, self.flush_bytes, self.empty_window_s = 1 << 20, 2 << 20, 0.0
        self.l2_reset, self.flags, self.details = None, [], {"flush_bytes": 2 << 20}
        self.spin_hz, self.spin_s, self.probe = 1e9, 50e-6, None

    def _measure_spin_hz(self) -> float:
        return 1e9

    def flush(self) -> None:
        self.fake.log.append("flush")

    def spin(self) -> None:
        pass

    def end_sample(self) -> None:
        self.fake.log.append("end")

    def measure_empty_window(self, n: int = 15) -> float:
        return 0.0


class _Graph:
    fake: _FakeCuda

    def capture_begin(self) -> None:
        self.fake.capturing = True

    def capture_end(self) -> None:
        self.fake.capturing = False

    def replay(self) -> None:
        for op in self.fake.ops:
            op()
        self.fake.now += self.fake.replay_call_s * len(self.fake.ops)
        self.fake.log.append("replay")


class _FakeCuda:
    """A fake device: a clock the candidate and replays advance, events that read it, and a graph
    whose replays re-run the work the candidate recorded while capturing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, eager_s: float = 1e-6, replay_call_s: float = 1e-6):
        self.now = 0.0
        self.capturing = False
        self.ops: list = []
        self.log: list[str] = []
        self.eager_s, self.replay_call_s = eager_s, replay_call_s
        setup = type("Setup", (_Setup,), {"fake": self})
        graph = type("Graph", (_Graph,), {"fake": self})
        for name, value in (("_Setup", setup), ("_Event", _Event), ("_record", self.record),
                            ("_synchronize", lambda: None), ("_elapsed_ms", lambda s, e: (e.t - s.t) * 1e3)):
            monkeypatch.setattr(tc, name, value)
        for name, value in (("_CUDAGraph", graph), ("_Stream", _Stream), ("_stream_ctx", _stream_ctx),
                            ("_synchronize", lambda: None), ("_rng_snapshot", lambda device: None)):
            monkeypatch.setattr(tg, name, value)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def record(self, event: _Event, stream: object) -> None:
        event.t = self.now

    def honest(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Eager: the work now. Captured: a static output the replays recompute from the inputs."""
        if not self.capturing:
            self.now += self.eager_s
            return _honest(x, y)
        out = torch.empty_like(x)
        self.ops.append(lambda: torch.add(y, x, alpha=2, out=out))
        return out

    def stale(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """While captured, record only a copy of the answer for the data the set holds now."""
        if not self.capturing:
            return self.honest(x, y)
        done, out = _honest(x, y), torch.empty_like(x)
        self.ops.append(lambda: out.copy_(done))
        return out


def _cuda_config(method: str, samples: int = 6) -> TimingConfig:
    return TimingConfig(device="cuda", method=method, cupti=False, clock_probe=False, budget_s=1.0, warmup_s=0.0,
                        min_samples=samples, max_samples=samples, reset_persisting_l2=False)


@pytest.mark.parametrize("method", ["events", "graph"])
def test_cuda_loops_edit_keep_and_refresh(monkeypatch, method):
    fake = _FakeCuda(monkeypatch)
    sets = _sets(3)
    original = [[t.clone() for t in s] for s in sets]
    edits, fresh = _plan(sets)
    verify = Verify(sets, edits, keep=[0, 2, 4, 5], refresh=(1, fresh))
    result, last = drive(timing_plan(sets, _cuda_config(method), verify), fake.honest)
    assert result.method == method and verify.sample == 6 == result.n
    assert [(s, i) for s, i, _ in verify.kept] == [(0, 0), (2, 2), (4, 1), (5, 2)]
    for s, i, out in verify.kept:  # each kept output is that sample's set as it was then
        assert torch.equal(out, _honest(*_edited(original, edits, i, s))), (s, i)
    for i in (0, 2):
        assert torch.equal(last[i], _honest(*_edited(original, edits, i, 5)))
    assert torch.equal(verify.refreshed, _honest(*fresh))  # a graph replay or a call on the new data
    assert fake.log.count("end") == 6  # an end marker after every timed sample
    if method == "graph":
        assert fake.log.count("replay") == 1 + 6 + 1  # upload, samples, refresh


def test_a_capture_that_records_a_stale_copy_fails_the_refresh(monkeypatch):
    fake = _FakeCuda(monkeypatch)
    sets = _sets(2)
    fresh = [torch.randn(8), torch.randn(8)]
    verify = Verify(sets, keep=[1], refresh=(0, fresh))
    drive(timing_plan(sets, _cuda_config("graph"), verify), fake.stale)
    assert not torch.equal(verify.refreshed, _honest(*fresh))  # the parent's refresh check fails it


def test_graph_to_events_fallback_keeps_the_sample_numbering(monkeypatch):
    # Eager 15 us, 1 us a call in the graph: "graph_much_faster_than_eager", auto falls back to events.
    fake = _FakeCuda(monkeypatch, eager_s=15e-6, replay_call_s=1e-6)
    sets = _sets(2)
    original = [[t.clone() for t in s] for s in sets]
    edits = [Edit(7, 1, 0, torch.tensor([3]), torch.tensor([5.0]))]  # during the events samples
    verify = Verify(sets, edits, keep=[1, 7, 9], refresh=(1, [torch.randn(8), torch.randn(8)]))
    result, _ = drive(timing_plan(sets, _cuda_config("auto", samples=5), verify), fake.honest)
    assert result.method == "events" and "graph_much_faster_than_eager" in result.flags
    assert verify.sample == 10  # 5 replays, then 5 events samples, numbered on
    assert [(s, i) for s, i, _ in verify.kept] == [(1, 1), (7, 1), (9, 1)]
    for s, i, out in verify.kept:
        assert torch.equal(out, _honest(*_edited(original, edits, i, s)))
    assert fake.log.count("replay") == 1 + 5  # no refresh replay: the refresh ran as an events call


def _fake_cupti(monkeypatch: pytest.MonkeyPatch, spans: list[float]) -> list[int]:
    """Traces of the fake device: each chunk's samples get the next spans of ``spans`` (the all-stream
    times the result reports); returns the sample count of every trace, in order."""
    it = iter(spans)
    traces: list[int] = []

    def traced(self):
        traces.append(0)
        return contextlib.nullcontext("trace")

    def all_stream_stats(self, trace, n):
        traces[-1] = n
        return [{"span_s": next(it), "kernels": 1, "streams": ["7"], "timed_span_s": 0.0, "tail_s": 0.0} for _ in range(n)]

    monkeypatch.setattr(tc._Setup, "traced", traced)
    monkeypatch.setattr(tc._Setup, "all_stream_stats", all_stream_stats)
    monkeypatch.setattr(tc._Setup, "learn_delimiters", lambda self: None)
    return traces


def _cupti_config(min_samples: int, max_samples: int) -> TimingConfig:
    return TimingConfig(device="cuda", method="auto", cupti=True, clock_probe=False, budget_s=1e3, warmup_s=0.0,
                        min_samples=min_samples, max_samples=max_samples, reset_persisting_l2=False)


def test_all_stream_timer_stops_when_the_spans_ci_reaches_the_target(monkeypatch):
    fake = _FakeCuda(monkeypatch, eager_s=15e-6)
    spans = [float(x) for x in np.random.default_rng(2).normal(12e-6, 0.3e-6, 5000)]  # 2.5% spread
    traces = _fake_cupti(monkeypatch, spans)
    sets = _sets(2)
    result, _ = drive(timing_plan(sets, _cupti_config(10, 2000), Verify(sets)), fake.honest)
    assert result.stop_reason == "ci_target" and result.method == "events"
    assert result.samples_s == spans[:result.n] and sum(traces) == result.n  # the spans, not the events
    assert traces[0] == 10 and len(traces) >= 2  # the floor first, then chunks
    ends = np.cumsum(traces)
    for n, met in ((ends[-1], True), (ends[-2], False)):  # met at the last check, not at the one before
        lo, hi = median_ci(spans[:n])
        med = statistics.median(spans[:n])
        assert (max(med - lo, hi - med) <= 0.01 * med) == met
    assert result.ci95_rel <= 0.01 and result.details["cupti_traces"] == len(traces)


def test_the_first_trace_lasts_until_the_events_ci_is_met(monkeypatch):
    """A trace costs about the same whatever its length: the first one runs until the events' CI
    meets the target (not only the floor), and where the spans agree no second trace follows."""
    fake = _FakeCuda(monkeypatch, eager_s=15e-6)
    durations: list[float] = []
    noisy = iter(float(x) for x in np.random.default_rng(4).normal(12e-6, 0.3e-6, 5000))  # 2.5% spread

    def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        durations.append(next(noisy))
        fake.now += durations[-1]
        return _honest(x, y)

    traces: list[int] = []
    monkeypatch.setattr(tc._Setup, "traced", lambda self: traces.append(0) or contextlib.nullcontext("trace"))

    def all_stream_stats(self, trace, n):  # the spans of the chunk's samples: their own durations
        traces[-1] = n
        return [{"span_s": d, "kernels": 1, "streams": ["7"], "timed_span_s": 0.0, "tail_s": 0.0} for d in durations[-n:]]

    monkeypatch.setattr(tc._Setup, "all_stream_stats", all_stream_stats)
    monkeypatch.setattr(tc._Setup, "learn_delimiters", lambda self: None)
    sets = _sets(2)
    result, _ = drive(timing_plan(sets, _cupti_config(10, 2000), Verify(sets)), run)
    assert result.stop_reason == "ci_target" and traces == [result.n] and result.n > 10
    assert result.details["cupti_traces"] == 1 and result.ci95_rel <= 0.01


def test_all_stream_timer_respects_floor_and_ceiling(monkeypatch):
    fake = _FakeCuda(monkeypatch, eager_s=15e-6)
    traces = _fake_cupti(monkeypatch, [12e-6] * 100)
    sets = _sets(2)
    result, _ = drive(timing_plan(sets, _cupti_config(16, 2000), Verify(sets)), fake.honest)
    assert (result.stop_reason, result.n, traces) == ("ci_target", 16, [16])  # constant: the floor, one trace
    noisy = [float(x) for x in np.random.default_rng(3).uniform(5e-6, 20e-6, 100)]
    traces = _fake_cupti(monkeypatch, noisy)
    result, _ = drive(timing_plan(sets, _cupti_config(10, 37), Verify(sets)), fake.honest)
    assert (result.stop_reason, result.n, sum(traces)) == ("max_samples", 37, 37)


def test_a_trace_that_cannot_be_cut_falls_back_to_the_events_for_every_sample(monkeypatch):
    fake = _FakeCuda(monkeypatch, eager_s=15e-6)
    spans = [float(x) for x in np.random.default_rng(4).normal(12e-6, 0.6e-6, 100)]  # never within 1% by 10
    traces = _fake_cupti(monkeypatch, spans)
    cut = tc._Setup.all_stream_stats

    def second_fails(self, trace, n):
        if len(traces) == 2:  # as the real one does when the trace holds other than n samples
            self.flags.append("cupti_unattributed")
            traces[-1] = n
            return None
        return cut(self, trace, n)

    monkeypatch.setattr(tc._Setup, "all_stream_stats", second_fails)
    sets = _sets(2)
    result, _ = drive(timing_plan(sets, _cupti_config(10, 2000), Verify(sets)), fake.honest)
    assert "cupti_unattributed" in result.flags and result.cupti is None
    assert len(traces) == 2 and result.n >= sum(traces)  # no trace after the failed one; events go on
    assert result.samples_s == pytest.approx([15e-6] * result.n)  # the event times, not the spans of chunk 1
    assert result.stop_reason == "ci_target"  # by the events' CI (constant: met at the next check)


@pytest.mark.parametrize("config", [_cuda_config("events"), _cuda_config("graph"), _cuda_config("auto", samples=5),
                                    _cupti_config(10, 40)], ids=["events", "graph", "auto", "all_streams"])
def test_a_cuda_timing_result_holds_only_the_records_declared_timing_keys(monkeypatch, config):
    """What the CUDA loops put into a result (details, cupti) is declared by the record's timing part: the
    parent refuses any other key in a worker's timing reply."""
    from solbench.data.record_parts import Timing

    fake = _FakeCuda(monkeypatch, eager_s=15e-6 if config.method == "auto" else 1e-6)
    if config.cupti:
        _fake_cupti(monkeypatch, [float(x) for x in np.random.default_rng(5).normal(12e-6, 0.3e-6, 100)])
    sets = _sets(2)
    result, _ = drive(timing_plan(sets, config, Verify(sets)), fake.honest)
    timing = Timing.model_validate(result.as_dict())
    assert timing.details is not None and timing.details.warmup_s is not None
    assert (timing.cupti is not None) == config.cupti
