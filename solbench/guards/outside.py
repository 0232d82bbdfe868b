"""What the parent sees of a worker from outside it: the kernel's count of CPU time, NVML's view of the GPU.

Nothing here asks the worker anything; a candidate controls its worker's replies, not these.

* CPU time (``/proc/<pid>/stat``: utime + stime, and cutime + cstime of children it has reaped) of the
  worker and, apart, of its descendants, zombies included (a zombie's time is still in its stat until
  it is reaped, then in its parent's cutime). :func:`cpu_times` is a snapshot; :func:`other_process_work`
  turns what a window saw into the finding that work was done by a process other than the worker.
* The cores' busy time (``/proc/stat``, per core the worker may run on) less the worker's and its
  descendants': what other processes took of those cores in the window (``outside_cpu_s``). A
  candidate cannot add to it (whatever it starts is its descendant: the worker is a subreaper).
* NVML (:func:`device_processes`, :func:`utilization_since`): the processes holding a context on the
  device, per-process SM utilisation samples and the device's utilisation samples after a timestamp.
  NVML names processes by the host's pids; in a container with its own pid namespace they may not
  match the parent's, which the result says (``pids_visible``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from solbench.guards.concurrency import _proc_stat, stat_fields
from solbench.guards.findings import REWARD_HACK, Finding

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
# CPU time of other processes during a timing window below which nothing is concluded: a few clock
# ticks (a descendant that only exits, a watchdog that wakes up).
OTHER_CPU_S = 0.03


@dataclass(frozen=True)
class CpuTimes:
    """CPU seconds so far: the worker itself, children it reaped, and each live or zombie descendant."""

    worker_s: float
    reaped_s: float
    descendants: dict[int, float]
    worker_run_s: float = 0.0  # the worker's live threads' run time (schedstat, ns precision)
    main_wait_s: float = 0.0  # how long the worker's main thread waited, runnable, for a core (schedstat)

    @property
    def others_s(self) -> float:
        """Every process but the worker: its descendants, live or zombie, and those reaped."""
        return self.reaped_s + sum(self.descendants.values())


def _times(pid: int) -> tuple[float, float, int] | None:
    """(own utime+stime, reaped children's cutime+cstime, ppid) of a process, or None when gone."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    own = (int(fields[11]) + int(fields[12])) * _TICK_S
    reaped = (int(fields[13]) + int(fields[14])) * _TICK_S
    return own, reaped, int(fields[1])


def _all_children() -> dict[int, list[int]]:
    """ppid -> pids, every process, zombies included."""
    children: dict[int, list[int]] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return children
    for pid in entries:
        st = _proc_stat(str(pid))
        if st is not None:
            children.setdefault(st[1], []).append(pid)
    return children


def cpu_times(pid: int) -> CpuTimes:
    """The kernel's count of CPU time of ``pid`` and of every descendant (zombies too), now."""
    mine = _times(pid)
    if mine is None:
        return CpuTimes(0.0, 0.0, {})
    children = _all_children()
    found: dict[int, float] = {}
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        t = _times(p)
        if t is None or p in found:
            continue
        found[p] = t[0] + t[1]  # its own time and what it reaped
        todo.extend(children.get(p, []))
    return CpuTimes(mine[0], mine[1], found, _run_time_s(pid), _main_wait_s(pid))


def _main_wait_s(pid: int) -> float:
    """The run-queue wait of the main thread of ``pid`` (``/proc/<pid>/schedstat``, second field, ns): time
    it was runnable but another process had the core. A busy machine adds that to any wall time."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * 1e-9
    except (OSError, ValueError, IndexError):
        return 0.0


def _run_time_s(pid: int) -> float:
    """Run time of the live threads of ``pid`` (``/proc/<pid>/task/*/schedstat``, nanoseconds): precise
    where utime+stime counts clock ticks, but blind to threads that have exited."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total * 1e-9


def busy_core_s(cores: frozenset[int]) -> float:
    """Seconds the given cores spent busy so far (``/proc/stat``: every state but idle and iowait), in
    clock ticks; 0 where it cannot be read."""
    total = 0
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                name, *fields = line.split()
                if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cores:
                    continue
                ticks = [int(f) for f in fields[:8]]
                total += sum(ticks) - ticks[3] - ticks[4]  # less idle and iowait
    except (OSError, ValueError):
        return 0.0
    return total * _TICK_S


def _cores(pid: int) -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(pid))
    except OSError:
        return frozenset()


def other_process_work(seen: dict[str, Any], window: str) -> list[Finding]:
    """REWARD_HACK when processes other than the worker (its descendants: live, zombie or reaped in
    between) used CPU during ``window`` (``seen``: what :meth:`Observer.start`'s function returned).
    Their work is outside what the worker's clock measured."""
    used = seen.get("other_cpu_s", 0.0)
    if used < OTHER_CPU_S:
        return []
    pids = seen.get("other_pids") or []
    who = f" (pids {', '.join(map(str, pids[:5]))})" if pids else " (since reaped)"
    return [Finding("other_process", REWARD_HACK,
                    f"processes started by the candidate used {used * 1e3:.0f} ms of CPU during {window}{who}; "
                    "work in another process is outside the timed window")]


def device_processes(nvml: Any, handle: Any) -> list[int]:
    """Pids holding a compute context on the device (NVML's, i.e. the host's pids)."""
    try:
        return sorted(int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except Exception:  # noqa: BLE001 - NVML errors are not the candidate's
        return []


def nvml_timestamp_us(nvml: Any, handle: Any) -> int:
    """The newest timestamp of the device's utilisation samples (NVML's clock, microseconds), or 0."""
    try:
        _, samples = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
        return max((int(s.timeStamp) for s in samples), default=0)
    except Exception:  # noqa: BLE001
        return 0


def utilization_since(nvml: Any, handle: Any, since_us: int) -> dict[str, Any]:
    """Device utilisation samples (percent) and per-process SM utilisation newer than ``since_us``."""
    out: dict[str, Any] = {"device": [], "processes": {}}
    try:
        _, samples = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, since_us)
        out["device"] = [(int(s.timeStamp), int(s.sampleValue.uiVal)) for s in samples if int(s.timeStamp) > since_us]
    except Exception as err:  # noqa: BLE001
        out["device_error"] = str(err)[:200]
    try:
        for s in nvml.nvmlDeviceGetProcessUtilization(handle, since_us):
            if int(s.timeStamp) > since_us:
                pid = int(s.pid)
                out["processes"][pid] = max(out["processes"].get(pid, 0), int(s.smUtil))
    except Exception as err:  # noqa: BLE001 - NVML_ERROR_NOT_FOUND when no sample is newer
        out["process_error"] = str(err)[:200]
    return out


class Observer:
    """The parent's outside view of one worker over a window: ``done = observer.start()``, the window,
    then ``done()`` gives the worker's CPU seconds, its descendants' and, on a GPU, NVML's view."""

    def __init__(self, pid: int, device: str, gpu_uuid: str | None = None):
        self.pid = pid
        self.nvml: Any = None
        self.handle: Any = None
        if device.startswith("cuda"):
            try:
                from solbench.timing import init_nvml, nvml_handle

                self.nvml = init_nvml()
                index = int(device.split(":")[1]) if ":" in device else 0
                self.handle = nvml_handle(self.nvml, gpu_uuid, index)
            except Exception:  # noqa: BLE001 - no NVML: the CPU view only
                self.nvml = None

    def start(self) -> Any:
        before = cpu_times(self.pid)
        cores = _cores(self.pid)
        busy0 = busy_core_s(cores)
        since = nvml_timestamp_us(self.nvml, self.handle) if self.nvml is not None else 0
        t0 = _monotonic()

        def done() -> dict[str, Any]:
            wall = _monotonic() - t0
            after = cpu_times(self.pid)
            # The precise count, unless threads that exited in between took time with them: then
            # the ticks, which include them, are larger by more than their rounding.
            run = after.worker_run_s - before.worker_run_s
            ticks = after.worker_s - before.worker_s
            run = ticks if ticks > run * 1.1 + 3 * _TICK_S else run
            seen: dict[str, Any] = {"wall_s": wall, "worker_cpu_s": run,
                                    "worker_wait_s": max(after.main_wait_s - before.main_wait_s, 0.0),
                                    "other_cpu_s": after.others_s - before.others_s,
                                    "other_pids": sorted(p for p, t in after.descendants.items()
                                                         if t > before.descendants.get(p, 0.0))}
            if cores:  # what processes other than the worker's took of its cores (the parent's included)
                busy = busy_core_s(cores) - busy0
                seen["cores"] = len(cores)
                seen["outside_cpu_s"] = max(busy - max(run, ticks) - seen["other_cpu_s"], 0.0)
            if self.nvml is not None:
                seen["nvml"] = self._device_view(since, wall)
            return seen

        return done

    def _device_view(self, since: int, wall_s: float) -> dict[str, Any]:
        util = utilization_since(self.nvml, self.handle, since)
        holders = device_processes(self.nvml, self.handle)
        samples = [v for _, v in util["device"]]
        view: dict[str, Any] = {"device_util_samples": len(samples), "context_pids": holders,
                                "pids_visible": self.pid in holders, "process_sm_util": util["processes"]}
        if samples:
            view["device_util_mean"] = sum(samples) / len(samples) / 100
            view["device_busy_s"] = view["device_util_mean"] * wall_s
        return view


def device_findings(view: dict[str, Any], worker: int, descendants: frozenset[int]) -> list[Finding]:
    """REWARD_HACK when a descendant of the worker held a context on the device, or did device work
    (per-process SM utilisation), during the window NVML saw."""
    nvml = view.get("nvml") or {}
    busy = {int(p) for p, u in (nvml.get("process_sm_util") or {}).items() if u > 0}
    offenders = sorted((set(nvml.get("context_pids") or ()) | busy) & set(descendants) - {worker})
    if not offenders:
        return []
    return [Finding("device_process", REWARD_HACK,
                    f"process(es) {', '.join(map(str, offenders[:5]))} started by the candidate held a context on "
                    "the device during the timing; device work in another process is outside the timed window")]


def _monotonic() -> float:
    import time

    return time.monotonic()
