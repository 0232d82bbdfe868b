"""Graph-mode pieces on the CPU: batch sizing, the L2 policy text, and that a failed capture is
undone (stream context exited, capture ended, RNG restored and checked) through fake CUDA layers."""

from __future__ import annotations

import contextlib

import pytest

from solbench.timing import drive
from solbench.timing import graph as tg


@pytest.mark.parametrize(("est_s", "n_sets"), [(1e-6, 4), (20e-6, 3), (1e-3, 2), (1e-9, 1), (5e-6, 7)])
def test_batch_is_whole_set_cycles_within_bounds(est_s, n_sets):
    calls = tg.batch_calls(est_s, n_sets)
    assert calls % n_sets == 0 and calls >= n_sets
    assert calls <= tg.GRAPH_MAX_CALLS + n_sets
    # ~1 ms of work where the bounds allow it
    want = min(tg.GRAPH_MAX_CALLS, max(tg.GRAPH_MIN_CALLS, tg.GRAPH_REPLAY_TARGET_S / est_s))
    assert want <= calls < want + n_sets


def test_l2_policy_says_cold_only_above_twice_l2():
    l2 = 50 * 2**20
    assert "l2: cold" in tg.l2_policy(4, 30 * 2**20, l2)  # 120 MiB > 100 MiB
    assert "l2: warm" in tg.l2_policy(4, 20 * 2**20, l2)  # 80 MiB
    assert "unknown size" in tg.l2_policy(4, None, l2)


class _Fakes:
    def __init__(self, monkeypatch, fail_at_end: bool = False):
        self.log: list[str] = []
        self.current = "main"
        log = self.log
        fakes = self

        class Stream:
            def __init__(self, device=None):
                pass

            def wait_stream(self, other):
                pass

        class Graph:
            def capture_begin(self):
                log.append("begin")

            def capture_end(self):
                log.append("end")
                if fail_at_end:
                    raise RuntimeError("capture invalidated")

        @contextlib.contextmanager
        def stream_ctx(s):
            prev, fakes.current = fakes.current, "side"
            try:
                yield
            finally:
                fakes.current = prev

        monkeypatch.setattr(tg, "_Stream", Stream)
        monkeypatch.setattr(tg, "_CUDAGraph", Graph)
        monkeypatch.setattr(tg, "_stream_ctx", stream_ctx)
        monkeypatch.setattr(tg, "_synchronize", lambda: None)
        monkeypatch.setattr(tg, "_rng_snapshot", lambda device: "snap")
        monkeypatch.setattr(tg, "restore_rng", lambda device, snap: log.append(f"restore {snap}") or "ok")


def test_capture_keeps_the_last_output_of_each_set(monkeypatch):
    fakes = _Fakes(monkeypatch)
    calls = []

    def fn(i):
        calls.append(i)
        return ("out", i, len(calls))

    graph, outs = drive(tg.capture([(0,), (1,), (2,)], 6, "dev", _Main()), fn)
    assert calls[3:] == [0, 1, 2, 0, 1, 2]  # 3 warm-up calls, then the batch
    assert outs == {0: ("out", 0, 7), 1: ("out", 1, 8), 2: ("out", 2, 9)}
    assert fakes.log == ["begin", "end"] and fakes.current == "main"


@pytest.mark.parametrize("fail_at_end", [False, True])
def test_failed_capture_is_undone(monkeypatch, fail_at_end):
    fakes = _Fakes(monkeypatch, fail_at_end=fail_at_end)
    capturing = {"n": 0}

    def fn(i):
        capturing["n"] += 1
        if capturing["n"] > 3 and not fail_at_end:  # raises inside the capture (after warm-up)
            raise RuntimeError("synchronize while capturing")
        return i

    with pytest.raises(RuntimeError) as info:
        drive(tg.capture([(0,), (1,)], 4, "dev", _Main()), fn)
    assert info.value.rng_status == "ok"
    assert fakes.log[0] == "begin" and "end" in fakes.log and fakes.log[-1] == "restore snap"
    assert fakes.current == "main"  # the side stream is not left current


class _Main:
    def wait_stream(self, other):
        pass
