"""The driver's process lock (solbench.engine.cudalock) on a real GPU: a worker busy on the device is locked, its
work drained and stopped, then runs again once unlocked. Skipped without CUDA."""

from __future__ import annotations

import select
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from solbench.engine.cudalock import process_locker

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# A process that launches 50 ms device spins back to back, printing a count after each one completes.
_BUSY = textwrap.dedent("""
    import sys, torch
    torch.cuda.init()
    cycles = int(sys.argv[1])
    n = 0
    print("ready", flush=True)
    while True:
        torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        n += 1
        print(n, flush=True)
""")


def _spin_cycles(seconds: float) -> int:
    """Cycles of torch's spin kernel that last about ``seconds`` here."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    torch.cuda.synchronize()
    return int(1_000_000 * seconds / (start.elapsed_time(end) * 1e-3))


def _count(proc: subprocess.Popen, until: float) -> int:
    """The busy process's last count printed before ``until`` (0: none), reading lines as they come."""
    last = 0
    while (left := until - time.monotonic()) > 0:
        if select.select([proc.stdout], [], [], left)[0]:
            line = proc.stdout.readline().strip()
            last = int(line) if line.isdigit() else last
    return last


@gpu
def test_a_locked_process_runs_no_device_work_until_unlocked():
    locker = process_locker()
    if locker is None:
        pytest.skip("this driver has no process lock (cuCheckpointProcessLock)")
    proc = subprocess.Popen([sys.executable, "-c", _BUSY, str(_spin_cycles(0.05))], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        before = _count(proc, time.monotonic() + 0.5)
        t0 = time.monotonic()
        unlock = locker(proc.pid)
        took = time.monotonic() - t0
        assert unlock is not None, "the driver refused the lock"
        # Locked: its spin in flight completed (the lock waited for it, < 50 ms), no new one starts: a short
        # kernel of ours runs at once, not behind a 50 ms spin of the other process.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begun = time.perf_counter()
        start.record()
        torch.cuda._sleep(1000)
        end.record()
        torch.cuda.synchronize()
        waited = time.perf_counter() - begun
        during = _count(proc, time.monotonic() + 0.3)  # what it printed while locked: at most the spin drained
        assert unlock() is True
        after = _count(proc, time.monotonic() + 0.5)
        print(f"lock took {took * 1e3:.1f} ms; our kernel waited {waited * 1e3:.2f} ms while it was locked")
        assert took < 0.5 and waited < 0.02
        assert during <= before + 1, "no spin started while it was locked"
        assert after > before + 2, "it runs again once unlocked"
    finally:
        proc.kill()
        proc.wait()


@gpu
def test_several_busy_processes_locked_one_after_another_and_at_once():
    """What a timing window pays to lock every other worker in flight: 8 busy processes locked in turn, then all
    at once from threads (both printed); each is locked and unlocked either way. A process without a CUDA
    context yet: the driver's answer printed (what a worker still importing gets)."""
    import concurrent.futures

    locker = process_locker()
    if locker is None:
        pytest.skip("this driver has no process lock (cuCheckpointProcessLock)")
    cycles = _spin_cycles(0.002)
    procs = [subprocess.Popen([sys.executable, "-c", _BUSY, str(cycles)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(8)]
    bare = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        took = {}
        for how in ("in turn", "at once"):
            t0 = time.monotonic()
            if how == "in turn":
                unlocks = [locker(p.pid) for p in procs]
            else:
                with concurrent.futures.ThreadPoolExecutor(len(procs)) as pool:
                    unlocks = list(pool.map(lambda p: locker(p.pid), procs))
            took[how] = time.monotonic() - t0
            assert all(u is not None for u in unlocks), f"refused {how}: {dict(locker.refusals)}"
            assert all(u() for u in unlocks)
        no_context = locker(bare.pid)
        print(f"8 locks: in turn {took['in turn'] * 1e3:.1f} ms, at once {took['at once'] * 1e3:.1f} ms; "
              f"a process without a CUDA context: {'locked' if no_context else dict(locker.refusals)}")
        if no_context is not None:
            no_context()
    finally:
        for proc in [*procs, bare]:
            proc.kill()
            proc.wait()


def test_the_locker_counts_the_drivers_refusals_by_code_and_unlocks_what_it_locked():
    """On any machine: the driver's entry points stood in for, the locker passes the pid and its timeout, gives
    None and counts the code when the driver refuses, and an unlock that reports whether it took."""
    from solbench.engine.cudalock import ProcessLocker

    calls: list[tuple] = []

    def lock(pid, args):
        calls.append(("lock", pid, args._obj.timeoutMs))
        return 0 if pid == 7 else 999

    def unlock(pid, args):
        calls.append(("unlock", pid))
        return 0

    locker = ProcessLocker(lock, unlock, 250)
    assert locker(8) is None and locker(8) is None and dict(locker.refusals) == {999: 2}
    release = locker(7)
    assert release is not None and release() is True
    assert calls == [("lock", 8, 250), ("lock", 8, 250), ("lock", 7, 250), ("unlock", 7)]
