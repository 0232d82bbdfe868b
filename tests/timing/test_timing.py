"""The CPU timing loop, the CUPTI trace attribution and the clock summary (CPU-only pieces).

The CUDA loops need a GPU: `benchmarks/gpu_timing_smoke.py` checks them on the H200.
"""

import json
import time

import numpy as np
import pytest
import torch

import solbench.timing.cpu as timing_cpu
from solbench.errors import SolbenchError
from solbench.timing import TimingConfig, time_calls
from solbench.timing.clockprobe import cooldown, summarize_chunks
from solbench.timing.cupti import call_stats, split_calls, summarize_calls


class FakeClock:
    """A perf_counter_ns stand-in that only advances when the timed function says so."""

    def __init__(self):
        self.now = 0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def fake_clock(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing_cpu, "_perf_counter_ns", clock)
    return clock


def test_constant_time_stops_early_on_ci(fake_clock):
    def fn(i):
        fake_clock.now += 250_000  # 250 us, every call
        return i

    res, _ = time_calls(fn, 3, TimingConfig(budget_s=10.0, warmup_s=0.01, min_samples=10))
    assert res.stop_reason == "ci_target"
    assert res.n == 10  # min_samples, no more: the CI is zero-width from the start
    assert res.median_s == pytest.approx(250e-6)
    assert res.method == "cpu" and res.flush_bytes == 0
    assert res.warmup_calls == 40 and res.details["warmup_s"] == pytest.approx(0.01)  # 10 ms of 250 us calls


def test_noisy_runs_to_the_budget(fake_clock):
    rng = np.random.default_rng(0)

    def fn(i):
        fake_clock.now += int(rng.uniform(100_000, 2_000_000))
        return i

    res, _ = time_calls(fn, 2, TimingConfig(budget_s=0.2, warmup_s=0.0, max_samples=100_000))
    assert res.stop_reason == "budget"
    assert 0.2 <= sum(res.samples_s) <= 0.2 + 2e-3 + 1e-9  # stops at the first sample past the budget
    assert res.ci95_rel > 0.01


def test_statistics_of_the_result_match_numpy(fake_clock):
    durations = iter([int(x) for x in np.random.default_rng(5).integers(1_000, 9_000, 10_000)])

    def fn(i):
        fake_clock.now += next(durations)

    res, _ = time_calls(fn, 1, TimingConfig(budget_s=1.0, warmup_s=0.0, max_samples=300))
    a = np.array(res.samples_s)
    assert res.n == len(a) == 300 and res.stop_reason == "max_samples"
    assert res.median_s == pytest.approx(np.median(a))
    assert res.p10_s == pytest.approx(np.percentile(a, 10))
    assert res.p90_s == pytest.approx(np.percentile(a, 90))
    assert res.iqr_s == pytest.approx(np.percentile(a, 75) - np.percentile(a, 25))
    assert (res.min_s, res.mean_s) == (pytest.approx(a.min()), pytest.approx(a.mean()))


def test_min_samples_respected_when_budget_is_tiny():
    res, _ = time_calls(lambda i: i, 1, TimingConfig(budget_s=1e-9, warmup_s=0.0, min_samples=17))
    assert res.n == 17 and res.stop_reason == "budget"


def test_real_clock_spin_stops_before_budget():
    def spin(i):
        t_end = time.perf_counter_ns() + 200_000
        while time.perf_counter_ns() < t_end:
            pass

    res, _ = time_calls(spin, 2, TimingConfig(budget_s=3.0, warmup_s=0.01, target_rel_ci=0.05))
    assert res.stop_reason == "ci_target"
    assert res.median_s == pytest.approx(200e-6, rel=0.5)


def test_last_outputs_are_copies_of_each_sets_last_call():
    shared = torch.zeros(4)
    calls = []

    def fn(i):
        calls.append(i)
        shared.fill_(len(calls))  # the same buffer every call, as a lazy candidate might return
        return shared, {"aux": shared * 2}

    res, last = time_calls(fn, 3, TimingConfig(budget_s=0.05, warmup_s=0.0, max_samples=40))
    assert set(last) == {0, 1, 2}
    for i in range(3):
        expected = max(k + 1 for k, s in enumerate(calls) if s == i)  # value of set i's last call
        out, aux = last[i]
        assert torch.all(out == expected) and torch.all(aux["aux"] == 2 * expected)
        assert out.data_ptr() != shared.data_ptr()


def test_timer_is_bound_at_import(monkeypatch):
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)  # a candidate patching the clock
    res, _ = time_calls(lambda i: sum(range(2000)), 1, TimingConfig(budget_s=0.05, warmup_s=0.0))
    assert res.median_s > 0


def test_result_as_dict_is_json():
    res, _ = time_calls(lambda i: i, 1, TimingConfig(budget_s=0.01, warmup_s=0.0, min_samples=3, max_samples=3))
    d = res.as_dict()
    assert d["ci95_rel"] is None  # 3 samples: no 95% interval, recorded as null not inf
    assert json.loads(json.dumps(d))["n"] == 3


@pytest.mark.parametrize("kwargs", [
    {"method": "graph"}, {"device": "tpu"}, {"method": "fast"}, {"min_samples": 0}, {"budget_s": 0},
    {"device": "cuda", "method": "cpu"},
])
def test_bad_config_is_a_one_line_user_error(kwargs):
    with pytest.raises(SolbenchError) as err:
        time_calls(lambda i: i, 1, TimingConfig(**kwargs))
    assert "\n" not in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_says_so():
    with pytest.raises(SolbenchError, match="no CUDA device"):
        time_calls(lambda i: i, 1, TimingConfig(device="cuda"))


def _ev(name, ts, dur, stream=7):
    return {"name": name, "cat": "kernel", "ts_us": ts, "dur_us": dur, "stream": stream}


def test_cupti_trace_is_split_into_calls_by_delimiters():
    flush, spin = ["fill"], "spin_kernel"
    events = []
    t = 0.0
    for j in range(3):
        events += [_ev("fill", t, 40), _ev(spin, t + 50, 10)]
        events += [_ev("gemm", t + 61, 5.0), _ev("fill", t + 67, 1.0)]  # a candidate's own fill kernel
        if j == 1:
            events.append(_ev("side", t + 62, 9.0, stream=9))  # another stream, ends after the timed one
        t += 100
    calls = split_calls(events, flush, spin)
    assert [len(c) for c in calls] == [2, 3, 2]
    info = summarize_calls(calls, 7)
    assert info["kernels_per_call"] == [2, 3, 2]
    assert info["kernel_sum_s"] == pytest.approx(6e-6)
    assert info["span_s"] == pytest.approx(7e-6)  # 61 .. 68 us
    assert info["streams"] == ["7", "9"]
    assert {"side_stream_work", "side_stream_tail"} <= set(info["flags"])


def test_cupti_single_stream_has_no_flags():
    events = [_ev("fill", 0, 40), _ev("spin", 50, 10), _ev("add", 61, 2.0)]
    info = summarize_calls(split_calls(events, ["fill"], "spin"), 7)
    assert info["flags"] == [] and info["span_s"] == pytest.approx(2e-6)


def test_clock_summary_flags_low_clock():
    info, flags = summarize_chunks([1900.0, 1000.0], [10, 10], 1980.0, median_s=1e-3)
    assert info["sm_mhz_effective"] == pytest.approx(1450.0)
    assert info["low_clock_fraction"] == pytest.approx(0.5)
    assert info["cycles_median"] == pytest.approx(1e-3 * 1450e6)
    assert info["median_s_at_max_clock"] == pytest.approx(1e-3 * 1450 / 1980)
    assert flags == ["low_clock"]
    info, flags = summarize_chunks([1970.0, None], [10, 10], 1980.0, median_s=1e-3)
    assert flags == [] and info["sm_mhz_effective"] == pytest.approx(1970.0)


def test_cooldown_without_nvml_returns_quickly():
    t0 = time.monotonic()
    out = cooldown(max_wait_s=0.01)
    assert time.monotonic() - t0 < 2.0
    assert set(out) >= {"available", "waited_s", "recovered"}


def _ev(name, ts, dur, stream=7):
    return {"name": name, "cat": "kernel", "ts_us": ts, "dur_us": dur, "stream": stream}


def test_split_calls_drops_the_trailing_clock_probe_and_counts_every_stream():
    """Two samples, the first followed by the harness's clock probe (zero fill + snapshot): the
    probe is not the candidate's time; a side-stream kernel that ends late is."""
    timeline = [_ev("flush", 0, 5), _ev("spin", 5, 10), _ev("k", 15, 2), _ev("side", 16, 20, stream=9),
                _ev("zero64", 40, 1), _ev("snap", 41, 1),
                _ev("flush", 50, 5), _ev("spin", 55, 10), _ev("k", 65, 2)]
    calls = split_calls(timeline, ["flush"], "spin", trailing=("zero64", "snap"))
    assert [[e["name"] for e in c] for c in calls] == [["k", "side"], ["k"]]
    first = call_stats(calls[0], 7)
    assert first["span_s"] == pytest.approx(21e-6) and first["timed_span_s"] == pytest.approx(2e-6)
    assert first["tail_s"] == pytest.approx(19e-6) and first["streams"] == ["7", "9"]
    # A probe-named kernel inside the call (not the exact trailing sequence) stays counted.
    inner = split_calls(timeline[:4] + [_ev("snap", 36, 30)], ["flush"], "spin", trailing=("zero64", "snap"))
    assert call_stats(inner[0], 7)["span_s"] == pytest.approx(51e-6)


def test_split_calls_cuts_at_the_last_end_marker():
    """The harness's work between samples (output copies, edits of inputs) follows an end marker (two
    one-cycle spins) and is not counted; a spin the candidate launches itself, before the marker,
    does not cut its call short; a call whose last kernel is named like the flush is no call start."""
    timeline = [_ev("flush", 0, 5), _ev("spin", 5, 10), _ev("k", 15, 2), _ev("spin", 17, 30), _ev("k2", 47, 3),
                _ev("spin", 60, 1), _ev("spin", 61, 1), _ev("copy", 70, 4), _ev("index_put", 80, 1),
                _ev("flush", 90, 5), _ev("spin", 95, 10), _ev("k", 105, 2), _ev("flush", 108, 1),
                _ev("spin", 120, 1), _ev("spin", 121, 1), _ev("copy", 130, 4)]
    calls = split_calls(timeline, ["flush"], "spin", end_name="spin")
    assert [[e["name"] for e in c] for c in calls] == [["k", "spin", "k2"], ["k", "flush"]]
    assert call_stats(calls[0], 7)["span_s"] == pytest.approx(35e-6)  # 15 .. 50 us
    # A call that launched nothing: its delimiter is followed by the whole marker, and still counts.
    empty = timeline[:9] + [_ev("flush", 90, 5), _ev("spin", 95, 10), _ev("spin", 120, 1), _ev("spin", 121, 1)]
    assert [[e["name"] for e in c] for c in split_calls(empty, ["flush"], "spin", end_name="spin")] == \
        [["k", "spin", "k2"], []]
    # Without the marker (the stand-alone cross-check), the whole body counts, as before.
    assert [len(c) for c in split_calls(timeline[:9], ["flush"], "spin")] == [7]


def test_split_calls_tells_the_start_spin_by_its_length():
    """A candidate whose first kernel is its own short spin, and whose last is a fill named like the
    flush, is still cut at the harness's delimiters when the start spin is told by its length."""
    def sample(t0, stream=7):
        return [_ev("flush", t0, 5), _ev("spin", t0 + 5, 10), _ev("spin", t0 + 15, 3), _ev("gemm", t0 + 15, 20, 9),
                _ev("flush", t0 + 36, 1), _ev("spin", t0 + 40, 0.5), _ev("spin", t0 + 41, 0.5), _ev("copy", t0 + 42, 2)]
    timeline = sample(0) + sample(100)
    calls = split_calls(timeline, ["flush"], "spin", end_name="spin", min_spin_us=5.0)
    assert [[e["name"] for e in c] for c in calls] == [["spin", "gemm", "flush"]] * 2
    assert call_stats(calls[0], 7)["span_s"] == pytest.approx(22e-6)  # its spin start to its fill end
    # The name-only rule takes the candidate's spin for an end marker and loses the samples.
    assert len(split_calls(timeline, ["flush"], "spin", end_name="spin")) != 2


def test_prewarm_builds_a_first_timings_singletons_once_and_leaves_a_failure_for_the_timing(monkeypatch):
    """At a worker's load, outside any timing window: the clock probe, the top clock and the L2 reset are made
    and cached under the keys the timing reads; one that fails is not cached (the timing meets and reports it)."""
    import solbench.timing.clockprobe as clockprobe
    import solbench.timing.cuda as tcuda

    made = []

    class Probe:
        def __init__(self, device):
            made.append(("probe", device.index))

    def no_nvml(index):
        raise RuntimeError("NVML not found")

    monkeypatch.setattr(tcuda, "_CACHE", {})
    monkeypatch.setattr(clockprobe, "ClockProbe", Probe)
    monkeypatch.setattr(clockprobe, "nvml_max_sm_mhz", no_nvml)
    monkeypatch.setattr(tcuda, "_PersistingL2Reset", lambda: made.append(("l2", None)) or "reset")
    tcuda.prewarm(3)
    assert made == [("probe", 3), ("l2", None)]
    assert set(tcuda._CACHE) == {"probe3", "l2_reset"}  # the keys _Setup reads; max_mhz3 failed: not cached
    tcuda.prewarm(3)
    assert len(made) == 2  # cached: made once per process


def test_prime_trace_learns_the_all_stream_timers_delimiters_on_a_gpu_only(monkeypatch):
    """Before a worker's first timing window: the timer's setup for the timing's own config and its delimiter
    kernels (CUPTI's first trace); nothing on the CPU or for an events-only timing."""
    import solbench.timing.cuda as tcuda

    built: list[tuple[str, bool]] = []

    class Setup:
        def __init__(self, config):
            built.append((config.device, config.cupti))

        def learn_delimiters(self):
            built.append(("delimiters", True))

    monkeypatch.setattr(tcuda, "_Setup", Setup)
    monkeypatch.setattr(tcuda.torch.cuda, "is_available", lambda: True)
    tcuda.prime_trace(TimingConfig(device="cpu"))
    tcuda.prime_trace(TimingConfig(device="cuda", cupti=False))
    assert built == []
    tcuda.prime_trace(TimingConfig(device="cuda"))
    assert built == [("cuda", True), ("delimiters", True)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_prime_trace_caches_the_delimiters_a_timing_reads():
    import solbench.timing.cuda as tcuda

    config = TimingConfig(device="cuda")
    tcuda.prime_trace(config)
    device = torch.device("cuda", torch.cuda.current_device())
    assert f"delimiters{device.index}:{tcuda.flush_bytes_for(config, device)}" in tcuda._CACHE
