"""Guards at the process level (solbench.guards): threads and processes left running, timer and
checker integrity, Landlock / subreaper / dumpable limits, and the CUDA guards (GPU tests marked).

Limits that cannot be undone (Landlock, subreaper, no-dump) are applied in a child Python so the
test process is unchanged; each child reports what it observed on stdout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from solbench.guards import (
    REWARD_HACK,
    ConcurrencySnapshot,
    check_concurrency,
    check_persisting_l2,
    check_timer_integrity,
    landlock_abi,
    persisting_l2_limit,
    poison_free_memory,
    reset_persisting_l2,
    snapshot_concurrency,
    timer_integrity_snapshot,
)

ROOT = Path(__file__).resolve().parents[2]
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _child(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# --- threads and processes ---------------------------------------------------------------------

def _wait_then_exit(stop: threading.Event) -> None:
    stop.wait(5)


def test_thread_left_running_is_found_and_a_joined_one_is_not() -> None:
    before = snapshot_concurrency()
    joined = threading.Thread(target=lambda: None)
    joined.start()
    joined.join()
    # The kernel thread of a joined Python thread can outlive join() by a moment: the grace covers it.
    assert check_concurrency(before, grace_s=0.2) == []
    stop = threading.Event()
    left = threading.Thread(target=_wait_then_exit, args=(stop,), name="left-behind")
    left.start()
    try:
        found = check_concurrency(before)
    finally:
        stop.set()
        left.join()
    assert [(f.kind, f.status) for f in found] == [("thread", REWARD_HACK)]
    assert "left-behind" in found[0].reason


def test_lenient_check_counts_only_threads_running_candidate_code() -> None:
    before = snapshot_concurrency()
    stop = threading.Event()
    mine = threading.Thread(target=_wait_then_exit, args=(stop,))  # defined in this file
    library = threading.Thread(target=stop.wait, args=(5,))  # stdlib code only
    mine.start()
    library.start()
    try:
        found = check_concurrency(before, candidate_files=[__file__], strict=False)
        ignored = check_concurrency(before, candidate_files=["/nonexistent/candidate.py"], strict=False)
    finally:
        stop.set()
        mine.join()
        library.join()
    assert len(found) == 1 and "test_guards_process.py" in found[0].reason
    assert ignored == []


def test_the_worker_hook_reads_the_threads_once_per_request_and_keeps_that_reading_as_its_baseline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook took a second reading after its check as the next baseline: a thread started between the two
    was in the baseline and never reported (and each reading scans /proc). Now the check's reading is the
    baseline: the thread started right after one check is found by the next."""
    from solbench.guards import concurrency, hooks

    state = hooks._WorkerState.__new__(hooks._WorkerState)
    state.concurrency, state.calls, state.native_growth = snapshot_concurrency(), 1, 0
    reads = []
    real = concurrency.snapshot_concurrency
    stop = threading.Event()
    late = threading.Thread(target=_wait_then_exit, args=(stop,), name="started-after-the-check")

    def reading(*args: object) -> object:
        reads.append(1)
        now = real(*args)
        if len(reads) == 1:  # the check's reading taken: a thread starts before any later one
            late.start()
        return now

    monkeypatch.setattr(concurrency, "snapshot_concurrency", reading)
    monkeypatch.setattr(hooks, "snapshot_concurrency", reading)
    try:
        # Between the rounds' calls (strict): every new thread counts.
        assert hooks._concurrency(state, "call") == [] and len(reads) == 1
        found = hooks._concurrency(state, "call")
    finally:
        stop.set()
        late.join()
    assert [f.kind for f in found] == ["thread"] and "started-after-the-check" in found[0].reason


def test_grace_lets_a_finishing_thread_end() -> None:
    before = snapshot_concurrency()
    short = threading.Thread(target=time.sleep, args=(0.05,))
    short.start()
    assert check_concurrency(before, grace_s=0.5) == []
    short.join()


def test_the_parents_check_gives_no_grace_to_what_it_does_not_report() -> None:
    """The parent's check after a reply (baseline: nothing; native threads not looked at) returns at once on
    a worker with threads of its own and no process (it slept the whole grace after every reply), and still
    gives the grace to a process it would report (a control: a child that exits within it is not reported)."""
    worker = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                               "[threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(3)]\n"
                               "time.sleep(30)"])
    try:
        time.sleep(0.5)
        nothing = ConcurrencySnapshot(worker.pid, frozenset(), frozenset(), frozenset())
        assert snapshot_concurrency(worker.pid).native_threads  # the threads the check leaves out are there
        t0 = time.monotonic()
        assert check_concurrency(nothing, native=False, grace_s=1.0) == []
        assert time.monotonic() - t0 < 0.5, "no grace slept for threads it does not report"
    finally:
        worker.kill()
        worker.wait()
    me = snapshot_concurrency()
    short = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    t0 = time.monotonic()
    found = check_concurrency(me, native=False, grace_s=1.0)
    short.wait()
    assert found == [] and time.monotonic() - t0 >= 0.9, "the grace for a process it would report"


def test_live_child_process_is_found_and_a_zombie_is_not() -> None:
    before = snapshot_concurrency()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        found = check_concurrency(before)
        assert [(f.kind, str(child.pid) in f.reason) for f in found] == [("process", True)]
    finally:
        child.kill()
    time.sleep(0.3)  # dead but not reaped: a zombie does no work
    assert [f for f in check_concurrency(before) if f.kind == "process"] == []
    child.wait()


def test_a_processes_own_cgroup_lists_what_it_started_even_outside_its_tree(tmp_path: Path) -> None:
    """Read from the cgroup the process was placed in: a process it started in a new session whose
    parent is gone (no longer its descendant) is found; a zombie is not, nor the process itself, nor a
    process outside the group. The group's list stands in for the kernel's (a file of the same format)."""
    from solbench.guards import descendant_processes

    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    outside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    zombie = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.05)  # it exits and is not reaped: a zombie
        (tmp_path / "cgroup.procs").write_text(f"{owner.pid}\n{orphan.pid}\n{zombie.pid}\n")
        assert descendant_processes(owner.pid, str(tmp_path)) == frozenset({orphan.pid})
        assert descendant_processes(owner.pid) == frozenset(), "by the tree: not its descendant"
        before = ConcurrencySnapshot(owner.pid, frozenset(), frozenset(), frozenset(), str(tmp_path))
        assert [f.kind for f in check_concurrency(before, native=False)] == ["process"]
        gone = tmp_path / "gone"
        assert descendant_processes(owner.pid, str(gone)) == frozenset(), "an unreadable group: the /proc scan"
    finally:
        for p in (owner, orphan, outside, zombie):
            p.kill()
            p.wait()


def test_native_threads_are_listed_from_proc() -> None:
    snap = snapshot_concurrency()
    assert threading.get_native_id() in snap.native_threads
    assert threading.get_ident() in snap.python_threads


def test_subreaper_keeps_a_double_forked_daemon_in_view() -> None:
    # The daemon's intermediate parent exits, so without the subreaper it would be adopted by init.
    out = _child("""
        import subprocess, sys, time
        from solbench.guards import become_subreaper, snapshot_concurrency, check_concurrency
        print(become_subreaper())
        before = snapshot_concurrency()
        launcher = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(5)'], start_new_session=True)"
        subprocess.Popen([sys.executable, "-c", launcher], start_new_session=True).wait()
        time.sleep(0.3)
        print([f.kind for f in check_concurrency(before)])
    """)
    assert out.splitlines() == ["True", "['process']"]


def test_another_process_can_be_watched_from_outside() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        snap = snapshot_concurrency(child.pid)
        assert snap.pid == child.pid and snap.native_threads and snap.python_threads == frozenset()
    finally:
        child.kill()
        child.wait()


# --- integrity ----------------------------------------------------------------------------------

def test_integrity_snapshot_is_stable_and_sees_patched_timers(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = timer_integrity_snapshot()
    assert check_timer_integrity(snap) == []  # classmethods and C descriptors compare stable
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0)
    found = check_timer_integrity(snap)
    assert len(found) == 1 and found[0].status == REWARD_HACK
    assert "time.perf_counter_ns" in found[0].reason and "torch.cuda.Event.elapsed_time" in found[0].reason
    monkeypatch.undo()
    assert check_timer_integrity(snap) == []


def _watched_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = types.ModuleType("fake_harness_timing")
    exec(textwrap.dedent("""
        import time
        _clock = time.perf_counter_ns
        def measure(fn):
            return _clock()
        class Loop:
            def step(self):
                return 1
            @classmethod
            def make(cls):
                return cls()
    """), vars(mod))
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def test_integrity_watches_module_globals_code_and_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _watched_module(monkeypatch)
    snap = timer_integrity_snapshot(attributes=(), modules=[mod.__name__])
    assert check_timer_integrity(snap) == []
    mod._clock = lambda: 0  # the bound timer swapped through the module's globals
    mod.measure.__code__ = (lambda fn: 0).__code__
    mod.Loop.step = lambda self: 2
    reason = check_timer_integrity(snap)[0].reason
    assert "fake_harness_timing._clock" in reason
    assert "fake_harness_timing.measure.__code__" in reason
    assert "fake_harness_timing.Loop.step" in reason


def test_integrity_looks_each_entry_up_in_the_longest_watched_module_that_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each entry's module is found once, at the snapshot (the check was 9 ms a timing request when it sorted
    the modules for every entry): in nested watched modules a method of the inner one is watched through the
    inner module, the inner module's binding in the outer one through the outer."""
    inner = _watched_module(monkeypatch)
    outer = types.ModuleType("fake_harness")
    monkeypatch.setitem(sys.modules, "fake_harness", outer)
    monkeypatch.setitem(sys.modules, "fake_harness.timing", inner)
    outer.timing = inner
    inner.__name__ = "fake_harness.timing"
    inner.Loop.__module__ = "fake_harness.timing"
    snap = timer_integrity_snapshot(attributes=("time.perf_counter",), modules=["fake_harness", "fake_harness.timing"])
    assert snap.homes["fake_harness.timing.Loop.step"] == "fake_harness.timing"
    assert snap.homes["fake_harness.timing"] == "fake_harness" and "time.perf_counter" not in snap.homes
    assert check_timer_integrity(snap) == []
    inner.Loop.step = lambda self: 2
    outer.timing = types.ModuleType("fake_harness.timing")  # the outer module's binding swapped
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)  # resolved through sys.modules
    reason = check_timer_integrity(snap)[0].reason
    assert "fake_harness.timing.Loop.step" in reason and "fake_harness.timing," in reason
    assert "time.perf_counter" in reason


def test_integrity_sees_a_replaced_module(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _watched_module(monkeypatch)
    snap = timer_integrity_snapshot(attributes=(), modules=[mod.__name__])
    monkeypatch.setitem(sys.modules, mod.__name__, types.ModuleType(mod.__name__))
    assert "sys.modules['fake_harness_timing']" in check_timer_integrity(snap)[0].reason


# --- process limits --------------------------------------------------------------------------------

@pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")
def test_restrict_writes_allows_only_the_given_folders(tmp_path: Path) -> None:
    allowed, denied = tmp_path / "allowed", tmp_path / "denied"
    denied.mkdir()
    (denied / "results.jsonl").write_text("{}\n")
    out = _child(f"""
        from solbench.guards import restrict_writes
        print(restrict_writes([{str(allowed)!r}]))
        open({str(allowed / "ok.txt")!r}, "w").write("ok")
        for path in ({str(denied / "results.jsonl")!r}, {str(denied / "new.txt")!r}):
            try:
                open(path, "a").write("forged")
                print("wrote", path)
            except PermissionError:
                print("denied")
        print(open({str(denied / "results.jsonl")!r}).read().strip())
    """)
    lines = out.splitlines()
    assert lines[0].startswith("landlock abi") and "writes" in lines[0]
    assert lines[1:] == ["denied", "denied", "{}"]
    assert (allowed / "ok.txt").read_text() == "ok" and not (denied / "new.txt").exists()


def test_make_undumpable_and_subreaper_take_effect() -> None:
    out = _child("""
        import ctypes
        from solbench.guards import become_subreaper, make_undumpable
        libc = ctypes.CDLL(None)
        print(make_undumpable(), libc.prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
        flag = ctypes.c_int(0)
        print(become_subreaper(), libc.prctl(37, ctypes.byref(flag), 0, 0, 0), flag.value)  # PR_GET_CHILD_SUBREAPER
    """)
    assert out.splitlines() == ["True 0", "True 0 1"]


# --- CUDA guards ------------------------------------------------------------------------------------

def test_cuda_guards_are_inert_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: covered by the GPU tests")
    assert reset_persisting_l2() is False
    assert persisting_l2_limit() is None
    assert check_persisting_l2() is None
    assert poison_free_memory("cpu", 4096) == 4096
    assert poison_free_memory("cpu", 0) == 0


@gpu
def test_poisoned_free_memory_reads_nan() -> None:
    for n in (1000, 300_000, 3_000_000):  # small pool, large pool
        x = torch.ones(n, device="cuda")
        del x
        poison_free_memory("cuda", n * 4)
        stale = torch.empty(n, device="cuda")
        assert bool(torch.isnan(stale).all()), n


@gpu
def test_persisting_l2_limit_is_seen_and_reset() -> None:
    import ctypes

    from solbench.timing.cudart import libcudart as _libcudart

    torch.zeros(1, device="cuda")
    lib = _libcudart()
    lib.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    assert lib.cudaDeviceSetLimit(0x06, 4 << 20) == 0
    assert (persisting_l2_limit() or 0) > 0
    found = check_persisting_l2()
    assert found is not None and found.status == REWARD_HACK
    assert reset_persisting_l2() is True
    assert persisting_l2_limit() == 0 and check_persisting_l2() is None


@gpu
def test_output_stability_sees_unjoined_side_stream_work() -> None:
    from solbench.guards import check_output_stability

    a = torch.randn(4096, 4096, device="cuda")
    out = torch.zeros(4096, 4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keep the side stream busy, then write
        torch.mm(a, a, out=out)
    found = check_output_stability(out, "cuda", settle_s=0.0)
    assert [f.kind for f in found] == ["output_changed_after_return"]
