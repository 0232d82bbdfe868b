"""Which processes the CUDA driver's process lock refuses on this machine (run on a GPU; prints one line each).

A busy child process (device spins back to back) is locked and unlocked after each kind of setup a solbench
worker may go through: none; the timer's Kineto trace (CUPTI), as shipped and with Kineto's ``TEARDOWN_CUPTI=1``;
CUPTI's activity API used directly (cupti-python) and left by unsubscribing or by finalizing it; a CUDA graph;
a legacy CUDA IPC allocation of another process opened; a VMM (cuMemCreate) allocation imported by a POSIX fd as
the device pool does. A refused lock is tried again after 1 s (a teardown may finish late). Each child also says
what its setup cost (ms per trace) and whether its traces still saw kernels.
H200 call 23 (2026-12-03): a timing that asked every process in flight was refused 333 times, code 801.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent("""
    import json, os, sys, time
    kind = sys.argv[1]
    import torch
    torch.cuda.init()
    info, keep = {}, None

    def traces(n):
        from solbench.timing.cupti import DeviceTrace
        costs, kernels = [], []
        for _ in range(n):
            t = time.perf_counter()
            with DeviceTrace() as tr:
                torch.cuda._sleep(1000)
            kernels.append(sum(e["cat"] == "kernel" for e in tr.events()))
            costs.append(round((time.perf_counter() - t) * 1e3, 1))
            if kind == "teardown":
                graph()
        info.update(trace_ms=costs, kernels=kernels)

    def graph():
        x = torch.zeros(1024, device="cuda")
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            with torch.cuda.graph(g):
                x.add_(1)
        g.replay()
        torch.cuda.synchronize()
        return g

    def cupti_direct(finalize):
        from cupti import cupti
        seen = []
        cupti.activity_register_callbacks(lambda: (1 << 20, 0), lambda acts: seen.extend(acts))
        sub = cupti.subscribe(lambda *a: None, None)
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        cupti.activity_flush_all(1)
        cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
        cupti.unsubscribe(sub)
        if finalize:
            cupti.finalize()
        info.update(kernels=len(seen))

    if kind in ("kineto", "teardown"):
        traces(3)
    elif kind == "graph":
        keep = graph()
    elif kind in ("cupti_unsub", "cupti_final"):
        cupti_direct(kind == "cupti_final")
    elif kind == "ipc":
        import cupy
        keep = cupy.cuda.runtime.ipcOpenMemHandle(bytes.fromhex(sys.argv[2]))
    elif kind == "vmm":
        from solbench.worker import vmm
        keep = vmm.open_fd(int(sys.argv[2]), int(sys.argv[3]), 0)
    print("ready " + json.dumps(info), flush=True)
    while True:
        torch.cuda._sleep(100000)
        torch.cuda.synchronize()
""")


def _lock_once(locker, pid: int) -> str:
    before = dict(locker.refusals)
    unlock = locker(pid)
    if unlock is None:
        return "refused " + str({k: v - before.get(k, 0) for k, v in locker.refusals.items() if v != before.get(k, 0)})
    return f"locked, unlocked {unlock()}"


def probe(kind: str, locker, extra: list[str] = (), fds: tuple[int, ...] = (), env: dict[str, str] | None = None) -> str:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, *extra], stdout=subprocess.PIPE, text=True,
                            pass_fds=fds, env={**os.environ, **(env or {})})
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("ready"):
            proc.kill()
            return f"{kind}: the child did not start (exit {proc.wait()})"
        first = _lock_once(locker, proc.pid)
        said = f"{kind}: {first}"
        if first.startswith("refused"):
            time.sleep(1.0)
            said += f"; after 1 s: {_lock_once(locker, proc.pid)}"
        return f"{said}; setup {line[6:]}"
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    import torch

    if not torch.cuda.is_available():
        sys.exit("lock_probe.py: needs a CUDA device (run it on a GPU machine)")
    from solbench.engine.cudalock import process_locker

    locker = process_locker()
    if locker is None:
        print("no process lock in this driver")
        return
    for kind in ("plain", "kineto", "graph", "cupti_unsub", "cupti_final"):
        print(probe(kind, locker), flush=True)
    print(probe("teardown", locker, env={"TEARDOWN_CUPTI": "1"}), flush=True)
    from solbench.worker import vmm

    mapping, fd = vmm.create(1 << 21, 0)
    print(probe("vmm", locker, [str(fd), str(mapping.size)], (fd,)), flush=True)
    try:
        import cupy
    except ImportError:
        print(json.dumps({"ipc": "no cupy here"}))
        return
    buf = cupy.cuda.runtime.malloc(1 << 20)
    print(probe("ipc", locker, [bytes(cupy.cuda.runtime.ipcGetMemHandle(buf)).hex()]), flush=True)


if __name__ == "__main__":
    main()
