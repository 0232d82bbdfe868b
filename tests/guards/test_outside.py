"""The parent's view of a worker from outside (solbench.guards.outside): the kernel's count of CPU
time of a process and its descendants, and the findings drawn from it and from NVML's view."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from solbench.guards.findings import REWARD_HACK
from solbench.guards.outside import OTHER_CPU_S, Observer, cpu_times, device_findings, other_process_work

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def _spin(seconds: float) -> None:
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass


def test_the_worker_s_own_cpu_time_is_counted_precisely():
    done = Observer(os.getpid(), "cpu").start()
    _spin(0.2)
    seen = done()
    # This thread's 0.2 s, and what the process's other threads (torch's) did meanwhile.
    assert 0.19 <= seen["worker_cpu_s"] <= 0.5, seen
    assert seen["other_cpu_s"] < OTHER_CPU_S, seen


def test_work_in_a_descendant_is_a_finding_and_idling_one_is_not():
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(0.3)  # its start-up is before the window
        done = Observer(os.getpid(), "cpu").start()
        busy = subprocess.Popen([sys.executable, "-c", BUSY.format(s=0.3)])
        busy.wait()  # reaped: its time moves into this process's children's count
        seen = done()
        found = other_process_work(seen, "the timing")
        assert seen["other_cpu_s"] >= 0.25
        assert len(found) == 1 and found[0].status == REWARD_HACK and "the timing" in found[0].reason
        done = Observer(os.getpid(), "cpu").start()
        time.sleep(0.2)
        assert other_process_work(done(), "the timing") == []  # the idle child used nothing
    finally:
        idle.kill()
        idle.wait()


def test_a_live_busy_descendant_is_named():
    busy = subprocess.Popen([sys.executable, "-c", BUSY.format(s=2)])
    try:
        time.sleep(0.3)
        before = cpu_times(os.getpid())
        done = Observer(os.getpid(), "cpu").start()
        time.sleep(0.3)
        seen = done()
        assert busy.pid in before.descendants and busy.pid in seen["other_pids"]
        assert str(busy.pid) in other_process_work(seen, "the burst")[0].reason
    finally:
        busy.kill()
        busy.wait()


def test_device_findings_name_descendants_holding_a_context():
    view = {"nvml": {"context_pids": [10, 11, 12], "process_sm_util": {13: 40, 14: 0}}}
    found = device_findings(view, 10, frozenset({11, 13, 14}))
    assert len(found) == 1 and found[0].status == REWARD_HACK
    assert "11, 13" in found[0].reason  # 12 is not the worker's, 14 did nothing and holds no context
    assert device_findings(view, 10, frozenset()) == []
    assert device_findings({}, 10, frozenset({11})) == []  # no NVML view: nothing concluded


def test_what_other_processes_take_of_the_worker_s_cores_is_counted_apart():
    """A process that is no descendant of the observed one, busy on its cores, is ``outside_cpu_s``; the
    observed process's own work and its descendants' are not."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10)"])
    try:
        time.sleep(0.3)
        cores = sorted(os.sched_getaffinity(sleeper.pid))[:1]  # both on one core: the hog's time is all there
        os.sched_setaffinity(sleeper.pid, cores)
        done = Observer(sleeper.pid, "cpu").start()
        hog = subprocess.Popen([sys.executable, "-c", BUSY.format(s=0.5)])
        os.sched_setaffinity(hog.pid, cores)
        hog.wait()
        seen = done()
        assert seen["cores"] == 1 and seen["worker_cpu_s"] < 0.05, seen
        # The hog's 0.5 s, less what its start took before it was pinned; ticks of 10 ms.
        assert 0.3 <= seen["outside_cpu_s"] <= seen["wall_s"] + 0.02, seen
    finally:
        sleeper.kill()
        sleeper.wait()
    # The observed process's own work is not outside: on its one core, its time and the others' add up to
    # at most the wall time (whatever else the machine runs), where counting it twice would not.
    busy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)\n" + BUSY.format(s=0.4)
                             + "time.sleep(10)\n"])
    try:
        os.sched_setaffinity(busy.pid, cores)
        done = Observer(busy.pid, "cpu").start()
        time.sleep(2.0)  # its spin is over by then, even on a loaded machine; it is still alive
        seen = done()
    finally:
        busy.kill()
        busy.wait()
    assert seen["worker_cpu_s"] >= 0.3, seen
    assert seen["worker_cpu_s"] + seen["outside_cpu_s"] <= seen["wall_s"] + 0.03, seen
